# shellcheck shell=bash
# A real container runtime for one simulated node on the GPU machine: containerd v2 (CDI on) with runc, the CNI
# plugins, and NVIDIA's nvidia-cdi-hook and nvidia-container-runtime (tests/device/runtime_build.sh builds them).
# Sourced by walkthrough.sh --real-runtime; every function is rr_*, every variable rr_*.
#
#   rr_init BIN_DIR STATE_DIR NODE_DIR   where the binaries are, the runtime's own folder, the node's folder
#   rr_start runc|nvidia                 containerd with that default runtime (restarts it if running)
#   rr_images IMAGE                      the demo image (named IMAGE) and the pause image, made here and imported
#   rr_watch FILE                        (in the background) each demo container: `crictl ps`, then nvidia-smi -L
#   rr_stop                              pods, containerd, its shims, mounts, cgroups and folder: all gone
#
# Only 127.0.0.1 and Unix sockets: containerd listens on STATE_DIR/containerd.sock, its CRI streaming server on
# 127.0.0.1 (a port of its choosing), its debug and metrics listeners are off; pods get a network namespace whose
# only way out is none: loopback, plus a `dummy` eth0 (no veth, no bridge, no route to the host) holding an address in
# 127.1.0.0/16 from host-local, because containerd refuses a sandbox whose CNI result has no address on eth0 ("failed
# to find network info for sandbox"). State, images, network namespaces and runc's state are under STATE_DIR; the one
# exception is containerd's fixed shim socket folder /run/containerd/s (removed at the end when this made it).
#
# The GPU reaches a container only as on a cluster: with runc, through the CDI specs NVIDIA's device plugin (cdi-cri,
# cdi-annotations) or DRA driver wrote into the node's folders (containerd's cdi_spec_dirs), whose hooks are
# NVIDIA's nvidia-cdi-hook; with the `nvidia` runtime (envvar, volume-mounts: the GPU Operator makes it containerd's
# default), through nvidia-container-runtime in jit-cdi mode, which turns NVIDIA_VISIBLE_DEVICES (or the device
# plugin's /var/run/nvidia-container-devices mounts) into a CDI spec of its own and runs runc.

RR_PAUSE_IMAGE=registry.k8s.io/pause:3.10.2   # containerd v2.4's default sandbox image, pinned

rr_init() {
  rr_bin=$1 rr_dir=$2 rr_node=$3
  rr_sock="$rr_dir/containerd.sock"
  rr_pid=""
  rr_made_run_dir=""
  [ -d /run/containerd ] || rr_made_run_dir=1
  mkdir -p "$rr_dir"/{root,state,tmp,opt,runc,cni/net.d,cni/ipam,images}
  export CONTAINER_RUNTIME_ENDPOINT="unix://$rr_sock" IMAGE_SERVICE_ENDPOINT="unix://$rr_sock" PATH="$rr_bin:$PATH"
  rr_cni
  # NVIDIA's runtime (the `nvidia` runtime's binary): jit-cdi, its hook and runc from here, the node's CDI folders.
  cat > "$rr_dir/nvidia-container-runtime.toml" <<EOF
accept-nvidia-visible-devices-as-volume-mounts = true
accept-nvidia-visible-devices-envvar-when-unprivileged = true

[nvidia-container-runtime]
debug = "$rr_dir/nvidia-container-runtime.log"
log-level = "info"
mode = "jit-cdi"
runtimes = ["$rr_bin/runc"]

[nvidia-container-runtime.modes.cdi]
spec-dirs = ["$rr_node/etc/cdi", "$rr_node/var/run/cdi"]

[nvidia-ctk]
path = "$rr_bin/nvidia-cdi-hook"
EOF
}

# rr_cni: pods get loopback (containerd's own loopback network) and, because containerd wants an address on eth0
# in the CNI result, either a `dummy` eth0 from the CNI plugins (a device that leads nowhere) with a 127.1.x.x address
# from host-local, or, where the kernel has no dummy links, a plugin of ours that reports such an address for eth0
# without making any interface: either way the pod's network namespace has no way out.
rr_cni() {
  mkdir -p "$rr_dir/cni/bin"
  if unshare --net sh -c 'ip link add gpuops0 type dummy' 2>/dev/null; then
    rr_cni_type=dummy
    cat > "$rr_dir/cni/net.d/10-gpuops-loopback.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "gpuops-loopback-only", "plugins": [
  {"type": "dummy", "ipam": {"type": "host-local", "dataDir": "$rr_dir/cni/ipam",
    "ranges": [[{"subnet": "127.1.0.0/16", "rangeStart": "127.1.0.2", "rangeEnd": "127.1.255.254"}]]}}]}
EOF
  else
    rr_cni_type=gpuops-loopback-only
    cat > "$rr_dir/cni/bin/gpuops-loopback-only" <<'EOF'
#!/bin/sh
# CNI plugin: no interface made; ADD reports an address in 127.1.0.0/16 for the pod's eth0 (containerd's condition).
case $CNI_COMMAND in
  ADD) sum=$(printf %s "$CNI_CONTAINERID" | cksum | cut -d' ' -f1)
       printf '{"cniVersion": "1.0.0", "interfaces": [{"name": "%s", "sandbox": "%s"}], "ips": [{"address": "127.1.%d.%d/32", "interface": 0}]}\n' \
         "$CNI_IFNAME" "$CNI_NETNS" $((sum / 250 % 250)) $((sum % 250 + 2)) ;;
  VERSION) echo '{"cniVersion": "1.0.0", "supportedVersions": ["0.4.0", "1.0.0", "1.1.0"]}' ;;
esac
EOF
    chmod +x "$rr_dir/cni/bin/gpuops-loopback-only"
    cat > "$rr_dir/cni/net.d/10-gpuops-loopback.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "gpuops-loopback-only", "plugins": [{"type": "gpuops-loopback-only"}]}
EOF
  fi
}

# rr_config DEFAULT_RUNTIME: containerd's configuration (version 3, containerd 2.x).
rr_config() {
  local runtime
  cat <<EOF
version = 3
root = "$rr_dir/root"
state = "$rr_dir/state"
temp = "$rr_dir/tmp"

[grpc]
  address = "$rr_sock"
[ttrpc]
  address = "$rr_sock.ttrpc"
[debug]
  address = ""
  level = "info"
[metrics]
  address = ""

[plugins.'io.containerd.internal.v1.opt']
  path = "$rr_dir/opt"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$RR_PAUSE_IMAGE"
[plugins.'io.containerd.cri.v1.runtime']
  cdi_spec_dirs = ["$rr_node/etc/cdi", "$rr_node/var/run/cdi"]
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$rr_bin", "$rr_dir/cni/bin"]
    conf_dir = "$rr_dir/cni/net.d"
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "$1"
EOF
  for runtime in runc nvidia; do
    local binary="$rr_bin/runc"
    [ "$runtime" = nvidia ] && binary="$rr_bin/nvidia-container-runtime"
    cat <<EOF
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.$runtime]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.$runtime.options]
        BinaryName = "$binary"
        Root = "$rr_dir/runc"
        SystemdCgroup = false
EOF
  done
}

# rr_start DEFAULT_RUNTIME: (re)start containerd with that default runtime; the kubelet reconnects by itself.
rr_start() {
  rr_stop_containerd
  rr_config "$1" > "$rr_dir/config.toml"
  # The shim and the runtimes it runs inherit this environment: runc, the CNI plugins and nvidia-cdi-hook first on
  # PATH, NVIDIA's runtime reads its configuration from the file named here.
  PATH="$rr_bin:$PATH" NVIDIA_CTK_CONFIG_FILE_PATH="$rr_dir/nvidia-container-runtime.toml" \
    "$rr_bin/containerd" --config "$rr_dir/config.toml" >> "$rr_dir/containerd.log" 2>&1 &
  rr_pid=$!
  local _
  for _ in $(seq 100); do
    crictl info >/dev/null 2>&1 && break
    kill -0 "$rr_pid" 2>/dev/null || { tail -20 "$rr_dir/containerd.log"; return 1; }
    sleep 0.2
  done
  crictl version
  echo "containerd $("$rr_bin/containerd" --version | cut -d' ' -f3), default runtime $1 ($(grep -A3 "runtimes.$1.options" "$rr_dir/config.toml" | awk -F'"' '/BinaryName/ {print $2}')), CDI spec folders $(crictl info -o go-template --template '{{.config.cdiSpecDirs}}' 2>/dev/null), CNI $rr_cni_type"
}

rr_stop_containerd() {
  [ -n "$rr_pid" ] || return 0
  kill "$rr_pid" 2>/dev/null || true
  wait "$rr_pid" 2>/dev/null || true
  rr_pid=""
}

# rr_images IMAGE: the demo pods' image, made of this machine's own programs (bash and the few tools the pods' command
# runs, with their C library: what the CUDA base image under vLLM's image brings) and carrying that image's
# variables: NVIDIA_VISIBLE_DEVICES=all (every CUDA image sets it), PATH and LD_LIBRARY_PATH naming /usr/local/nvidia.
# No nvidia-smi and no driver library in it: those come only through NVIDIA's CDI specs. And the pause image.
rr_images() {
  local image=$1 py=${GPUOPS_DEVICE_PYTHON:-python3} helpers
  helpers=$(dirname "${BASH_SOURCE[0]}")
  "$py" "$helpers/oci_image.py" --output "$rr_dir/images/demo.tar" --name "$image" \
    --program bash --program sh --program env --program grep --program sort --program sleep --program cat --program ls \
    --libraries-of /usr/local/nvidia/bin/nvidia-smi --libraries-of "$(command -v nvidia-smi || echo /usr/bin/nvidia-smi)" \
    --env PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    --env NVIDIA_VISIBLE_DEVICES=all --env NVIDIA_DRIVER_CAPABILITIES=compute,utility
  "$py" "$helpers/oci_image.py" --output "$rr_dir/images/pause.tar" --name "$RR_PAUSE_IMAGE" \
    --file "$rr_bin/pause:/pause" --entrypoint /pause
  local tarball
  for tarball in demo pause; do
    "$rr_bin/ctr" --address "$rr_sock" --namespace k8s.io images import --platform linux/amd64 "$rr_dir/images/$tarball.tar"
  done
  crictl images
}

# rr_watch FILE: until killed, each demo container once: the `crictl ps` line that lists it, then what nvidia-smi -L
# prints inside it (`crictl exec` while it runs; its log once it has ended, as for the queue pod and the probe).
rr_watch() {
  local file=$1 py=${GPUOPS_DEVICE_PYTHON:-python3} seen=" " id state pod
  while :; do
    while read -r id state pod; do
      case $seen in *" $id "*) continue ;; esac
      [ "$state" = CONTAINER_CREATED ] && continue
      {
        echo "--- $pod: crictl ps -a --id $id"
        crictl ps -a --id "$id"
        if [ "$state" = CONTAINER_RUNNING ] && crictl exec -s --timeout 10 "$id" nvidia-smi -L > "$file.exec" 2>&1; then
          echo "crictl exec $id nvidia-smi -L:"; cat "$file.exec"
        else
          [ -s "$file.exec" ] && { echo "crictl exec $id nvidia-smi -L:"; cat "$file.exec"; }
          echo "crictl logs $id:"; crictl logs "$id" 2>&1 | head -12
        fi
      } >> "$file" 2>&1
      rm -f "$file.exec"
      seen="$seen$id "
    done < <(crictl ps -a -o json 2>/dev/null | "$py" -c 'import json, sys
for c in json.load(sys.stdin).get("containers", []):
    pod = c.get("labels", {}).get("io.kubernetes.pod.name", "")
    if pod.startswith("gpu-demo"):
        print(c["id"], c["state"], pod)' 2>/dev/null)
    sleep 0.3
  done
}

# rr_stop: every pod sandbox and container removed, containerd and its shims ended, the mounts under STATE_DIR
# undone, the cgroups runc made and the folder removed. Run after the kubelet has stopped (it would start them again).
rr_stop() {
  [ -n "${rr_dir:-}" ] && [ -d "$rr_dir" ] || return 0
  if [ -n "$rr_pid" ]; then
    crictl rmp --all --force 2>&1 | tail -3 || true
    crictl ps -a 2>/dev/null | tail -n +2 | wc -l | xargs echo "containers left:"
  fi
  rr_stop_containerd
  local pid
  grep -l -s -F -- "$rr_sock" /proc/[0-9]*/cmdline | cut -d/ -f3 | while read -r pid; do
    case $(readlink "/proc/$pid/exe" 2>/dev/null) in
      */containerd-shim-runc-v2) echo "ending shim $pid"; kill -9 "$pid" 2>/dev/null || true ;;
    esac
  done || true   # no shim left: grep finds nothing
  awk -v dir="$rr_dir" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r mount; do
    umount -l "$mount" 2>/dev/null || true
  done
  find /sys/fs/cgroup/k8s.io -depth -type d -exec rmdir {} + 2>/dev/null || true
  cp "$rr_dir/containerd.log" "$rr_dir/config.toml" "$rr_dir/nvidia-container-runtime.toml" "${out:-/tmp}/" 2>/dev/null || true
  cp "$rr_dir/nvidia-container-runtime.log" "${out:-/tmp}/" 2>/dev/null || true
  rm -rf "$rr_dir"
  if [ -n "$rr_made_run_dir" ]; then rm -rf /run/containerd; fi
  echo "real runtime stopped and removed: $(awk -v dir="$rr_dir" 'index($5, dir) == 1' /proc/self/mountinfo | wc -l) mounts left"
}

# rr_failures FILE: what the real runtime says when the GPU hand-off breaks, for the stand-in to say the same
# (tests/sim/node/runtime.go): a container naming a CDI device no spec holds, and one whose CDI spec names a hook that
# is not there (NVIDIA's specs name nvidia-cdi-hook; a node without the toolkit lacks it). Through crictl, in a pod
# sandbox of its own, with the demo image; everything removed after.
rr_failures() {
  local file=$1 image=$2 spec="$rr_node/var/run/cdi/gpuops-failure-probe.json" pod container case
  cat > "$spec" <<'JSON'
{"cdiVersion": "0.5.0", "kind": "gpuops.example/gpu", "devices": [{"name": "hooked", "containerEdits": {
  "env": ["GPUOPS_PROBE=1"], "hooks": [{"hookName": "createContainer", "path": "/nonexistent/nvidia-cdi-hook",
  "args": ["nvidia-cdi-hook", "create-symlinks", "--link", "a::/b"]}]}}]}
JSON
  cat > "$rr_dir/probe-pod.json" <<JSON
{"metadata": {"name": "gpuops-failure-probe", "namespace": "default", "uid": "gpuops-failure-probe-uid"},
 "log_directory": "$rr_dir/probe-logs", "linux": {}}
JSON
  (
    pod=$(crictl runp "$rr_dir/probe-pod.json") || { echo "(crictl runp failed: no pod sandbox, no probe)"; exit 0; }
    echo "pod sandbox $pod"
    for case in "missing=gpuops.example/gpu=missing" "hook=gpuops.example/gpu=hooked"; do
      printf '{"metadata": {"name": "%s"}, "image": {"image": "%s"}, "command": ["sh", "-c", "echo ran"], "log_path": "%s.log", "annotations": {"cdi.k8s.io/gpuops-probe": "%s"}}\n' \
        "${case%%=*}" "$image" "${case%%=*}" "${case#*=}" > "$rr_dir/probe-container.json"
      echo "== a container asking for CDI device ${case#*=}"
      echo "\$ crictl create"
      if container=$(crictl create "$pod" "$rr_dir/probe-container.json" "$rr_dir/probe-pod.json" 2>&1); then
        echo "created $container"
        echo "\$ crictl start"
        crictl start "$container" 2>&1 || echo "(exit $?)"
        echo "\$ crictl inspect: state, reason, exit code, message"
        crictl inspect -o go-template --template '{{.status.state}} reason={{.status.reason}} exitCode={{.status.exitCode}} message={{.status.message}}' "$container" 2>&1
      else
        echo "$container"; echo "(crictl create failed)"
      fi
    done
    crictl stopp "$pod" >/dev/null 2>&1; crictl rmp "$pod" 2>&1
  ) > "$file" 2>&1 || true
  rm -f "$spec"
  cat "$file"
}

# rr_smoke IMAGE: one pod of IMAGE asking for no GPU (no CDI device, the image's NVIDIA_VISIBLE_DEVICES=all) runs
# `nvidia-smi -L` under containerd's current default runtime; its output, state and exit code are printed. Under runc
# it must find no nvidia-smi; under NVIDIA's runtime it sees every GPU (the bypass the product's probe looks for).
rr_smoke() {
  local image=$1 pod container
  cat > "$rr_dir/smoke-pod.json" <<JSON
{"metadata": {"name": "gpuops-smoke", "namespace": "default", "uid": "gpuops-smoke-uid"},
 "log_directory": "$rr_dir/smoke-logs", "linux": {}}
JSON
  # shellcheck disable=SC2016  # $NVIDIA_VISIBLE_DEVICES is the container's, expanded there
  printf '{"metadata": {"name": "smoke"}, "image": {"image": "%s"}, "command": ["bash", "-c", "nvidia-smi -L; echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES; ls /dev | grep nvidia"], "log_path": "smoke.log"}\n' \
    "$image" > "$rr_dir/smoke-container.json"
  pod=$(crictl runp "$rr_dir/smoke-pod.json") || { echo "(crictl runp failed)"; return 0; }
  container=$(crictl create "$pod" "$rr_dir/smoke-container.json" "$rr_dir/smoke-pod.json") || { crictl rmp -f "$pod"; return 0; }
  crictl start "$container" || true
  sleep 2
  crictl ps -a --pod "$pod"
  crictl inspect -o go-template --template 'state={{.status.state}} exitCode={{.status.exitCode}} reason={{.status.reason}} ip={{.status.network}}{{"\n"}}' "$container" 2>/dev/null || true
  crictl inspectp -o go-template --template 'pod ip {{.status.network.ip}}{{"\n"}}' "$pod" 2>/dev/null || true
  echo "crictl logs:"; crictl logs "$container" 2>&1
  crictl stopp "$pod" >/dev/null 2>&1; crictl rmp "$pod" >/dev/null 2>&1 || true
}
