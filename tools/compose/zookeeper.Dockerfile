# The compose stack's ZooKeeper: Debian bookworm's `zookeeper` package, the very build the
# test suite runs (zkconsumer/_stack.py starts /usr/share/java/zookeeper.jar from it).
FROM debian:bookworm-slim
# man1 must exist for the JRE's post-install step on a slim image. The last step fails the
# build if Debian's package is ever another version than the one the suite runs.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get -o Acquire::Retries=3 update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Retries=3 install -y -q \
      --no-install-recommends zookeeper \
 && rm -rf /var/lib/apt/lists/* \
 && test -f /usr/share/java/zookeeper-3.8.0.jar \
 && test -f /usr/share/java/slf4j-simple.jar
