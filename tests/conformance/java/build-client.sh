#!/usr/bin/env bash
# Rebuild the official RocketMQ Java client jars in lib/ from their published sources, with
# javac and Debian's jars only (no Maven): apache/rocketmq tag rocketmq-all-4.9.8 (modules
# logging, remoting, common, client) and alibaba/fastjson tag 1.2.69.
#
#   build-client.sh            rebuild lib/*.jar and lib/SHA256SUMS
#   build-client.sh --check    rebuild into a temporary folder and compare with lib/SHA256SUMS
#
# Sources: ROCKETMQ_GIT and FASTJSON_GIT name a git repository (a URL or a local clone, bare
# or not) holding those tags; by default the GitHub ones are cloned (the tag only).
# Debian packages (installed by `manage.py runtests` when missing): default-jdk-headless
# (javac 17), libnetty-java, libcommons-lang3-java, libcommons-validator-java,
# libcommons-collections3-java, libjoda-time-java, libguava-java, libslf4j-java,
# libzstd-jni-java, liblz4-java.
#
# Reproducible: sources come from fixed tags, classes are compiled for Java 8 without
# debugging paths, and every jar lists its entries in sorted order with one fixed
# timestamp and a fixed manifest, so the same javac (17, as Debian 12 ships it) gives the
# same bytes.  A different javac may differ; --check then says which jar does.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROCKETMQ_GIT=${ROCKETMQ_GIT:-https://github.com/apache/rocketmq.git}
FASTJSON_GIT=${FASTJSON_GIT:-https://github.com/alibaba/fastjson.git}
ROCKETMQ_TAG=rocketmq-all-4.9.8
ROCKETMQ_VERSION=4.9.8
FASTJSON_TAG=1.2.69
DEBIAN_JARS=/usr/share/java
# The moment every jar entry carries (the date of no particular event: only fixed matters).
ENTRY_DATE=2023-01-01T00:00:00Z

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

for tool in git javac jar sha256sum; do
  command -v "$tool" >/dev/null || { echo "build-client.sh: $tool is needed" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$HERE/lib
[[ $check == 1 ]] && out=$work/out && mkdir -p "$out"

# export REPO TAG DEST: the tag's tree into DEST, from a local repository or a shallow clone.
export_tag() {
  local repo=$1 tag=$2 dest=$3
  mkdir -p "$dest"
  if git --git-dir="$repo" rev-parse --verify -q "$tag^{commit}" >/dev/null 2>&1; then
    git --git-dir="$repo" archive "$tag" | tar -x -C "$dest"
  elif git -C "$repo" rev-parse --verify -q "$tag^{commit}" >/dev/null 2>&1; then
    git -C "$repo" archive "$tag" | tar -x -C "$dest"
  else
    git clone -q --depth 1 --branch "$tag" "$repo" "$work/clone-$tag"
    git -C "$work/clone-$tag" archive "$tag" | tar -x -C "$dest"
  fi
}

debian_cp() {
  local cp="" name
  for name in "$@"; do
    [[ -f $DEBIAN_JARS/$name.jar ]] || { echo "build-client.sh: $DEBIAN_JARS/$name.jar is missing" >&2; exit 1; }
    cp+="${cp:+:}$DEBIAN_JARS/$name.jar"
  done
  echo "$cp"
}

# compile NAME CLASSPATH SOURCES_LIST -> $work/classes/NAME
compile() {
  local name=$1 classpath=$2 sources=$3
  mkdir -p "$work/classes/$name"
  if ! javac --release 8 -encoding UTF-8 -nowarn -proc:none -g:source,lines -Xlint:none \
    -cp "$classpath" -d "$work/classes/$name" "@$sources" >"$work/$name.javac.log" 2>&1; then
    cat "$work/$name.javac.log" >&2
    echo "build-client.sh: javac failed for $name" >&2
    exit 1
  fi
}

# package NAME TITLE VERSION: $work/classes/NAME -> $out/NAME.jar, entries sorted, fixed date.
package() {
  local name=$1 title=$2 version=$3 dir=$work/classes/$1
  printf 'Manifest-Version: 1.0\nCreated-By: Quiver tests/conformance/java/build-client.sh\nImplementation-Title: %s\nImplementation-Version: %s\n' \
    "$title" "$version" >"$work/$name.mf"
  (cd "$dir" && find . -type f | sed 's|^\./||' | LC_ALL=C sort >"$work/$name.entries")
  rm -f "$out/$name.jar"
  (cd "$dir" && jar --create --file "$out/$name.jar" --manifest "$work/$name.mf" \
    --date="$ENTRY_DATE" @"$work/$name.entries")
}

echo "build-client.sh: sources"
export_tag "$ROCKETMQ_GIT" "$ROCKETMQ_TAG" "$work/rocketmq"
export_tag "$FASTJSON_GIT" "$FASTJSON_TAG" "$work/fastjson"

netty=$(debian_cp netty-common netty-buffer netty-transport netty-codec netty-handler netty-resolver \
  netty-transport-native-epoll netty-transport-native-unix-common)
commons=$(debian_cp commons-lang3 commons-validator commons-collections3 slf4j-api zstd-jni lz4-java)

echo "build-client.sh: fastjson $FASTJSON_TAG"
# Left out: the Spring, JAX-RS and Retrofit integrations (frameworks a client never loads).
# The Moneta and Springfox codecs stay, compiled against stand-ins from stubs/.
(cd "$work/fastjson/src/main/java" && find . -name '*.java' \
  | grep -v -e '/support/spring/' -e '/support/jaxrs/' -e '/support/retrofit/' | LC_ALL=C sort) \
  | sed "s|^\.|$work/fastjson/src/main/java|" >"$work/fastjson.sources"
find "$HERE/stubs" -name '*.java' | LC_ALL=C sort >"$work/stubs.sources"
mkdir -p "$work/classes/stubs"
javac --release 8 -encoding UTF-8 -nowarn -d "$work/classes/stubs" "@$work/stubs.sources"
compile fastjson "$work/classes/stubs:$(debian_cp joda-time guava)" "$work/fastjson.sources"
mkdir -p "$work/classes/fastjson/META-INF"
cp "$work/fastjson/src/main/resources/META-INF/LICENSE.txt" "$work/fastjson/src/main/resources/META-INF/NOTICE.txt" \
  "$work/classes/fastjson/META-INF/"
package fastjson "fastjson" "$FASTJSON_TAG"

classpath=$out/fastjson.jar:$netty:$commons
for module in logging remoting common client; do
  echo "build-client.sh: rocketmq-$module $ROCKETMQ_VERSION"
  src=$work/rocketmq/$module/src/main/java
  # The client's OpenTracing hooks need opentracing-api, which Debian does not package.
  (cd "$src" && find . -name '*.java' | grep -v 'OpenTracingHookImpl\.java$' | LC_ALL=C sort) \
    | sed "s|^\.|$src|" >"$work/$module.sources"
  compile "rocketmq-$module" "$classpath" "$work/$module.sources"
  if [[ -d $work/rocketmq/$module/src/main/resources ]]; then
    cp -r "$work/rocketmq/$module/src/main/resources/." "$work/classes/rocketmq-$module/"
  fi
  mkdir -p "$work/classes/rocketmq-$module/META-INF"
  cp "$work/rocketmq/LICENSE" "$work/classes/rocketmq-$module/META-INF/LICENSE"
  cp "$work/rocketmq/NOTICE" "$work/classes/rocketmq-$module/META-INF/NOTICE"
  package "rocketmq-$module" "rocketmq-$module" "$ROCKETMQ_VERSION"
  classpath=$out/rocketmq-$module.jar:$classpath
done

(cd "$out" && sha256sum fastjson.jar rocketmq-logging.jar rocketmq-remoting.jar rocketmq-common.jar \
  rocketmq-client.jar >"$work/SHA256SUMS")
if [[ $check == 1 ]]; then
  if diff <(cat "$HERE/lib/SHA256SUMS") "$work/SHA256SUMS"; then
    echo "build-client.sh: the rebuilt jars are identical to lib/"
  else
    echo "build-client.sh: the rebuilt jars differ from lib/ (above: <committed >rebuilt; javac $(javac -version 2>&1))" >&2
    exit 1
  fi
else
  cp "$work/SHA256SUMS" "$out/SHA256SUMS"
  cp "$work/rocketmq/LICENSE" "$out/LICENSE"
  cp "$work/rocketmq/NOTICE" "$out/NOTICE"
  cp "$work/fastjson/license.txt" "$out/fastjson-LICENSE.txt"
  echo "build-client.sh: built into $out"
  cat "$out/SHA256SUMS"
fi
