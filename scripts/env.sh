# Source me (from any directory): `. scripts/env.sh [kilted|jazzy]`
# Activates the virtualenv of one ROS 2 distribution (`make setup ROS_DISTRO=<distro>`): the one
# named as argument, else $ROS_DISTRO, else kilted (kilted: .venv + build/, another: .venv-<distro>
# + build-<distro>/). Exposes the flexmodal_interfaces and flexmodal_native builds to Python, the dynamic linker and the
# ament index, exports ROS_DISTRO, and keeps ROS 2 traffic on this machine. Sourcing it again with
# another distribution replaces the first one's paths (nothing of two wheel sets is mixed).
_flexmodal_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
_flexmodal_distro="${1:-${ROS_DISTRO:-kilted}}"
if [ "$_flexmodal_distro" = kilted ]; then _flexmodal_suffix=""; else _flexmodal_suffix="-$_flexmodal_distro"; fi
_flexmodal_venv="$_flexmodal_root/.venv$_flexmodal_suffix"
_flexmodal_build="$_flexmodal_root/build$_flexmodal_suffix"
if [ ! -f "$_flexmodal_root/requirements-ros-$_flexmodal_distro.txt" ]; then
    echo "scripts/env.sh: ROS distribution '$_flexmodal_distro' has no wheel set here" \
         "(requirements-ros-<distro>.txt: $(cd "$_flexmodal_root" && ls requirements-ros-*.txt | sed 's/requirements-ros-//; s/\.txt//' | tr '\n' ' '))" >&2
    unset _flexmodal_root _flexmodal_distro _flexmodal_suffix _flexmodal_venv _flexmodal_build
    return 1 2>/dev/null || exit 1
fi
if [ ! -x "$_flexmodal_venv/bin/python" ]; then
    echo "scripts/env.sh: $_flexmodal_venv is missing; run 'make setup ROS_DISTRO=$_flexmodal_distro' first" >&2
    unset _flexmodal_root _flexmodal_distro _flexmodal_suffix _flexmodal_venv _flexmodal_build
    return 1 2>/dev/null || exit 1
fi

# shellcheck disable=SC1091
. "$_flexmodal_venv/bin/activate"
export ROS_DISTRO="$_flexmodal_distro"

# Remove from the colon-separated variable named $1 what an earlier sourcing (of any distribution)
# put there: entries under this checkout's .venv* and build* directories.
_flexmodal_strip() {
    [ -n "${!1+set}" ] || return 0
    local kept="" entry parts
    IFS=: read -ra parts <<< "${!1}"
    for entry in "${parts[@]}"; do
        case "$entry" in
            "$_flexmodal_root"/.venv*|"$_flexmodal_root"/build*) ;;
            *) kept="${kept:+$kept:}$entry" ;;
        esac
    done
    export "$1=$kept"
}
# Prepend $2 to the colon-separated variable named $1 unless it is already there.
_flexmodal_prepend() {
    local current="${!1:-}"
    case ":$current:" in
        *":$2:"*) ;;
        *) export "$1=$2${current:+:$current}" ;;
    esac
}

_flexmodal_prefix="$_flexmodal_build/interfaces/install"
_flexmodal_pyver="$(python -c 'import sys; print(f"python{sys.version_info[0]}.{sys.version_info[1]}")')"
for _flexmodal_var in AMENT_PREFIX_PATH PYTHONPATH LD_LIBRARY_PATH; do _flexmodal_strip "$_flexmodal_var"; done
# The ROS wheels' start-up hook (ros_wheels_bootstrapper.pth) adds the active virtualenv's library
# directories to LD_LIBRARY_PATH once and marks that in _ROS_WHEELS_BOOTSTRAP_COMPLETE; with its
# entries stripped above, the mark must go too so that the next python adds them again.
unset _ROS_WHEELS_BOOTSTRAP_COMPLETE
_flexmodal_prepend AMENT_PREFIX_PATH "$VIRTUAL_ENV"
_flexmodal_prepend AMENT_PREFIX_PATH "$_flexmodal_prefix"
_flexmodal_prepend PYTHONPATH "$_flexmodal_prefix/lib/$_flexmodal_pyver/site-packages"
_flexmodal_prepend LD_LIBRARY_PATH "$_flexmodal_prefix/lib"
_flexmodal_native="$_flexmodal_build/native/install"
_flexmodal_prepend AMENT_PREFIX_PATH "$_flexmodal_native"
_flexmodal_prepend LD_LIBRARY_PATH "$_flexmodal_native/lib"

# DDS discovery stays on loopback (never send traffic off this machine).
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
# Loopback-only receive sockets and faster participant discovery (config/fastdds_discovery.xml says
# why), unless you set your own: through the variable the installed Fast DDS reads (2.x, Jazzy:
# FASTRTPS_DEFAULT_PROFILES_FILE; 3.x, Kilted: FASTDDS_DEFAULT_PROFILES_FILE;
# flexmodal_ros/core/fastdds.py). The other one is unset if it names this profile (from an earlier
# sourcing for the other distribution: Kilted warns about the old name in every process).
_flexmodal_profile="$_flexmodal_root/config/fastdds_discovery.xml"
_flexmodal_var="$(python "$_flexmodal_root/flexmodal_ros/core/fastdds.py")"
for _flexmodal_other in FASTDDS_DEFAULT_PROFILES_FILE FASTRTPS_DEFAULT_PROFILES_FILE; do
    if [ "$_flexmodal_other" != "$_flexmodal_var" ] && [ "${!_flexmodal_other:-}" = "$_flexmodal_profile" ]; then
        unset "$_flexmodal_other"
    fi
done
export "$_flexmodal_var=${!_flexmodal_var:-$_flexmodal_profile}"
# Default domain for interactive use; tests pick their own private domain (test/conftest.py).
export ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-42}"

unset -f _flexmodal_prepend _flexmodal_strip
unset _flexmodal_root _flexmodal_distro _flexmodal_suffix _flexmodal_venv _flexmodal_build _flexmodal_prefix \
    _flexmodal_pyver _flexmodal_var _flexmodal_other _flexmodal_profile _flexmodal_native
