"""Where the official Java client's pieces are: the jars built from source in ``lib/`` and
the Debian jars it runs with.  Stdlib only: ``manage.py runtests`` asks it what to install."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Built by build-client.sh from apache/rocketmq rocketmq-all-4.9.8 and alibaba/fastjson 1.2.69.
CLIENT_JARS = ("fastjson", "rocketmq-logging", "rocketmq-remoting", "rocketmq-common", "rocketmq-client")
DEBIAN_JAR_DIR = Path("/usr/share/java")
# The Debian jars the client needs at run time, each with the package that installs it.
DEBIAN_JARS = {
    "netty-common": "libnetty-java",
    "netty-buffer": "libnetty-java",
    "netty-transport": "libnetty-java",
    "netty-codec": "libnetty-java",
    "netty-handler": "libnetty-java",
    "netty-resolver": "libnetty-java",
    "commons-lang3": "libcommons-lang3-java",
    "commons-validator": "libcommons-validator-java",
    "commons-collections3": "libcommons-collections3-java",
}
# javac compiles the scenarios (src/) at test time.
JDK_PACKAGE = "default-jdk-headless"


def classpath() -> str:
    """The run-time classpath: the client's jars, then Debian's."""
    jars = [HERE / "lib" / f"{name}.jar" for name in CLIENT_JARS]
    jars += [DEBIAN_JAR_DIR / f"{name}.jar" for name in DEBIAN_JARS]
    return os.pathsep.join(str(jar) for jar in jars)


def missing_packages() -> list[str]:
    """The Debian packages to install before the Java scenarios can run (none: ready)."""
    missing = {
        package for name, package in DEBIAN_JARS.items() if not (DEBIAN_JAR_DIR / f"{name}.jar").exists()
    }
    if shutil.which("javac") is None or shutil.which("java") is None:
        missing.add(JDK_PACKAGE)
    return sorted(missing)
