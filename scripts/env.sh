# Source me (from any directory): `. scripts/env.sh`
# Activates the project virtualenv, exposes the flexmodal_interfaces and flexmodal_native builds
# (make setup) to Python, the dynamic linker and the ament index, and keeps ROS 2 traffic on this
# machine.
_flexmodal_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
if [ ! -x "$_flexmodal_root/.venv/bin/python" ]; then
    echo "scripts/env.sh: $_flexmodal_root/.venv is missing; run 'make setup' first" >&2
    unset _flexmodal_root
    return 1 2>/dev/null || exit 1
fi

# shellcheck disable=SC1091
. "$_flexmodal_root/.venv/bin/activate"

# Prepend $2 to the colon-separated variable named $1 unless it is already there.
_flexmodal_prepend() {
    local current="${!1:-}"
    case ":$current:" in
        *":$2:"*) ;;
        *) export "$1=$2${current:+:$current}" ;;
    esac
}

_flexmodal_prefix="$_flexmodal_root/build/interfaces/install"
_flexmodal_pyver="$("$_flexmodal_root/.venv/bin/python" -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
_flexmodal_prepend AMENT_PREFIX_PATH "$VIRTUAL_ENV"
_flexmodal_prepend AMENT_PREFIX_PATH "$_flexmodal_prefix"
_flexmodal_prepend PYTHONPATH "$_flexmodal_prefix/lib/$_flexmodal_pyver/site-packages"
_flexmodal_prepend LD_LIBRARY_PATH "$_flexmodal_prefix/lib"
_flexmodal_native="$_flexmodal_root/build/native/install"
_flexmodal_prepend AMENT_PREFIX_PATH "$_flexmodal_native"
_flexmodal_prepend LD_LIBRARY_PATH "$_flexmodal_native/lib"

# DDS discovery stays on loopback (never send traffic off this machine).
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# Faster participant discovery (config/fastdds_discovery.xml says why), unless you set your own.
export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-$_flexmodal_root/config/fastdds_discovery.xml}"
# Default domain for interactive use; tests pick their own private domain (test/conftest.py).
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-42}"

unset -f _flexmodal_prepend
unset _flexmodal_root _flexmodal_prefix _flexmodal_pyver _flexmodal_native
