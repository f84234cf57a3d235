#!/usr/bin/env bash
# The Debian packages Sluice needs outside node_modules (docs/operations.md, "System packages").
# Run by npm itself: `postinstall` (mode `install`) and `pretest` (mode `test`).
#
#   runtime:  python3 (the task interpreter), bubblewrap (the script sandbox), python3-seccomp
#             (libseccomp's Python binding: the zygote's filter that denies tasks user namespaces),
#             python3-venv and python3-pip (elements' own dependencies, built at upload)
#   tests:    postgresql (server binaries for the throwaway test clusters), chromium (console tests),
#             default-jdk-headless, libjackson2-databind-java, python3-requests and golang-go (the
#             Java, Python and Go client tests, docs/errors.md "Clients as business systems write
#             them")
#
# When something is missing and this runs as root on Debian, it installs it with apt-get and says
# so. Otherwise it prints the exact command: mode `install` then only warns (npm install goes on),
# mode `test` fails, so that no test is ever skipped or failed for a missing system package.
# Nothing is done, and nothing printed, when everything is present.
set -euo pipefail

mode=${1:-test}
case "$mode" in
install | test) ;;
*)
  echo "usage: $0 [install|test]" >&2
  exit 2
  ;;
esac

say() { echo "sluice system-deps: $*" >&2; }

# The paths the service uses (SCRIPT_BWRAP, PYTHON); the tests always use the defaults.
bwrap=/usr/bin/bwrap
python=/usr/bin/python3
if [ "$mode" = install ]; then
  bwrap=${SCRIPT_BWRAP:-$bwrap}
  python=${PYTHON:-$python}
fi
chromium=/usr/bin/chromium # the console tests drive Debian's Chromium
# The client tests compile and run the Java client with these, against Debian's Jackson jars
# (libjackson2-databind-java brings jackson-core and jackson-annotations with it), and run the
# Python client on the system interpreter, whatever PYTHON says.
javac=/usr/bin/javac
java=/usr/bin/java
jackson_jars=(/usr/share/java/jackson-databind.jar /usr/share/java/jackson-core.jar /usr/share/java/jackson-annotations.jar)
# The Go client is built with Debian's Go toolchain (golang-go: /usr/bin/go, Go 1.19 on bookworm);
# it has no dependencies outside Go's standard library, so nothing else is fetched.
go=/usr/bin/go

# Found as the tests' PostgreSQL helper finds them: initdb and postgres in one directory of
# $PG_BIN, /usr/lib/postgresql/<major>/bin, then $PATH.
have_pg_server() {
  local dir
  local dirs=()
  local path_dirs=()
  [ -n "${PG_BIN:-}" ] && dirs+=("$PG_BIN")
  for dir in /usr/lib/postgresql/*/bin; do [ -d "$dir" ] && dirs+=("$dir"); done
  IFS=: read -r -a path_dirs <<<"${PATH:-}"
  dirs+=("${path_dirs[@]}")
  local found=""
  for dir in "${dirs[@]}"; do
    if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
      found=$dir
      break
    fi
  done
  [ -n "$found" ] || return 1
  # postgres refuses to run as root: as root the tests run it as the `postgres` OS user, which
  # Debian's package creates.
  [ "$(id -u)" != 0 ] || getent passwd postgres >/dev/null
}

# With `npm install --omit=dev` or NODE_ENV=production (a deployment) only what the service
# needs at run time.
want_test_deps=1
if [ "$mode" = install ] && { [[ "${npm_config_omit:-}" == *dev* ]] || [ "${NODE_ENV:-}" = production ]; }; then
  want_test_deps=0
fi

missing_pkgs=()
missing_what=()
check() {
  missing_pkgs=()
  missing_what=()
  if [ ! -x "$python" ]; then
    if [ "$python" = /usr/bin/python3 ]; then
      missing_pkgs+=(python3)
      missing_what+=("$python")
    else
      say "PYTHON=$python does not exist; Debian's python3 cannot provide it"
    fi
  fi
  # Imported by the interpreter that runs tasks, so asked of that interpreter.
  if [ ! -x "$python" ] || ! "$python" -I -c "import seccomp" >/dev/null 2>&1; then
    if [ "$python" = /usr/bin/python3 ]; then
      missing_pkgs+=(python3-seccomp)
      missing_what+=("libseccomp's Python binding (import seccomp)")
    elif [ -x "$python" ]; then
      say "PYTHON=$python cannot import seccomp; Debian's python3-seccomp serves /usr/bin/python3 only: install libseccomp's Python binding for it"
    fi
  fi
  # Element dependencies (docs/script-dependencies.md): environments are built with the task
  # interpreter's own venv and pip, Debian's python3-venv and python3-pip.
  if [ -x "$python" ] && [ "$python" = /usr/bin/python3 ]; then
    if ! "$python" -I -c "import ensurepip, venv" >/dev/null 2>&1; then
      missing_pkgs+=(python3-venv)
      missing_what+=("the interpreter's venv (import venv, ensurepip)")
    fi
    if ! "$python" -I -m pip --version >/dev/null 2>&1; then
      missing_pkgs+=(python3-pip)
      missing_what+=("the interpreter's pip (python3 -m pip)")
    fi
  fi
  if [ ! -x "$bwrap" ]; then
    if [ "$bwrap" = /usr/bin/bwrap ]; then
      missing_pkgs+=(bubblewrap)
      missing_what+=("$bwrap")
    else
      say "SCRIPT_BWRAP=$bwrap does not exist; Debian's bubblewrap cannot provide it"
    fi
  fi
  if [ "$want_test_deps" = 1 ]; then
    if ! have_pg_server; then
      missing_pkgs+=(postgresql)
      missing_what+=("PostgreSQL server (initdb, postgres)")
    fi
    if [ ! -x "$chromium" ]; then
      missing_pkgs+=(chromium)
      missing_what+=("$chromium")
    fi
    # default-jdk-headless is the JDK of the Debian release (OpenJDK 17 on bookworm): the client
    # is plain Java 17, so any newer javac compiles it too.
    if [ ! -x "$javac" ] || [ ! -x "$java" ]; then
      missing_pkgs+=(default-jdk-headless)
      missing_what+=("a JDK ($javac and $java)")
    fi
    local jar
    for jar in "${jackson_jars[@]}"; do
      if [ ! -f "$jar" ]; then
        missing_pkgs+=(libjackson2-databind-java)
        missing_what+=("$jar (Jackson)")
        break
      fi
    done
    if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -I -c "import requests" >/dev/null 2>&1; then
      missing_pkgs+=(python3-requests)
      missing_what+=("requests for /usr/bin/python3 (import requests)")
    fi
    if [ ! -x "$go" ]; then
      missing_pkgs+=(golang-go)
      missing_what+=("a Go toolchain ($go)")
    fi
  fi
}

join() {
  local IFS=,
  echo "$*" | sed 's/,/, /g'
}

check
if [ ${#missing_pkgs[@]} -gt 0 ]; then
  install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing_pkgs[*]}"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "missing $(join "${missing_what[@]}")"
    say "installing Debian packages: ${missing_pkgs[*]} (apt-get, as root)"
    if apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "${missing_pkgs[@]}" >/dev/null; then
      say "installed: ${missing_pkgs[*]}"
    else
      say "apt-get failed (its messages are above)"
    fi
    check
  fi
fi

problems=()
if [ ${#missing_pkgs[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    problems+=("missing $(join "${missing_what[@]}"): not a Debian system; install the equivalent of Debian's ${missing_pkgs[*]}")
  elif [ "$(id -u)" = 0 ]; then
    problems+=("still missing $(join "${missing_what[@]}"); install them as root with:
    $install_cmd")
  else
    problems+=("missing $(join "${missing_what[@]}"); install them as root with:
    $install_cmd
  (npm runs this script as the owner of the checkout, so \`sudo npm install\` does not do it;
  \`sudo bash bin/system-deps.sh\` does)")
  fi
fi

# Installed is not enough: in some containers bubblewrap cannot create its namespaces.
if [ -x "$bwrap" ] && ! out=$("$bwrap" --unshare-all --die-with-parent --ro-bind / / true 2>&1); then
  problems+=("$bwrap is installed but does not work here: ${out:-no output}
  (in a container, allow it to create namespaces, e.g. \`docker run --privileged\` or a seccomp
  profile that permits unshare/clone with namespace flags)")
fi

[ ${#problems[@]} -eq 0 ] && exit 0
for p in "${problems[@]}"; do say "$p"; done
if [ "$mode" = install ]; then
  say "npm install goes on; without bubblewrap \`npm start\` refuses script tasks (SCRIPT_SANDBOX=none accepts uid + rlimits only), and \`npm test\` fails until the above is done"
  exit 0
fi
say "npm test needs these; no test is skipped for a missing system package"
exit 1
