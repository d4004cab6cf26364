"""Packaging for zkconsumer (see README.md)."""

from setuptools import Extension, find_packages, setup

#: The documentation site (mkdocs.yml, docs/): MkDocs, its Material theme, and the API
#: reference generated from the docstrings.
DOCS = ["mkdocs>=1.6,<2", "mkdocs-material>=9.5,<10", "mkdocstrings[python]>=0.26"]

setup(
    name="zkconsumer",
    version="0.1.0",
    description=(
        "Kafka's legacy ZooKeeper-based high-level consumer "
        "(ZookeeperConsumerConnector), reimplemented in Python"
    ),
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["zkconsumer", "zkconsumer.*"]),
    # The pinned JVM classpaths' Maven projects: `zkconsumer stack up` resolves them.
    package_data={"zkconsumer": ["py.typed", "_speedups.pyi"],
                  "zkconsumer.stack": ["jvm/*/pom.xml"]},
    # The confluent fetch path's per-message steps in C (zkconsumer/_speedups.c). Optional:
    # without a C compiler the install goes on and zkconsumer does the same in Python.
    ext_modules=[
        Extension("zkconsumer._speedups", ["zkconsumer/_speedups.c"], optional=True),
    ],
    install_requires=[
        "kazoo[sasl]>=2.10,<3",  # sasl: pure-sasl, for zookeeper.auth=sasl:user:password
        # Fetching (the default fetch.backend): librdkafka, several times kafka-python's rate.
        "confluent-kafka>=2.3,<3",
        # Admin, metadata and offset requests, and fetch.backend=kafka-python.
        "kafka-python>=3.0,<4",
        "rich>=13",
        "prometheus-client>=0.20",
    ],
    extras_require={
        # The dev extra installs the docs' too: tools/test builds the site (mkdocs --strict).
        "dev": [
            "pytest>=8",
            "pytest-timeout>=2.3",
            # tools/test runs the suite in several processes: its tests mostly wait.
            "pytest-xdist>=3.5",
            "ruff>=0.17,<0.18",  # pinned to a minor: a new release must not turn CI red
            "mypy>=2.4,<2.5",
            "pyyaml>=6",
            "types-PyYAML",
            "matplotlib>=3.7",
            *DOCS,
        ],
        "docs": DOCS,
        "compare": ["matplotlib>=3.7"],
        "spark": ["pyspark>=4.2,<5", "pyarrow>=15"],
        # Kept so that `pip install zkconsumer[fast]` still works: confluent-kafka is a
        # requirement of the package itself now.
        "fast": [],
        # tools/compose-check's container faults (tests/compose): the Docker engine's API.
        "compose": ["docker>=7"],
        # tools/bench's peer rows (tools/bench_pykafka.py): pykafka 2.8.0's own requirements
        # but kazoo. pykafka itself pins kazoo==2.5.0, which our kazoo>=2.10 rules out (pip:
        # ResolutionImpossible), and runs on ours: tools/_bootstrap.sh installs it with
        # --no-deps after this extra.
        "bench": ["six>=1.10", "tabulate>=0.7"],
    },
    entry_points={"console_scripts": ["zkconsumer = zkconsumer.cli:main"]},
)
