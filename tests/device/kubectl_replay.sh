#!/usr/bin/env bash
# The seed's walkthrough, replayed with kubectl alone (as the platform team did it by hand on prod102):
# hold pod -> its nvidia-smi and NVIDIA_VISIBLE_DEVICES -> the node's ledger -> queue pod Pending with the
# scheduler's FailedScheduling -> delete the hold -> queue Succeeded on the same GPU -> cleanup.
# Usage: KUBECONFIG=... kubectl_replay.sh   (kubectl on PATH; node prod102, namespace gpu-operator)
set -euo pipefail
ns=gpu-operator
image=docker.m.daocloud.io/vllm/vllm-openai:latest
step() { printf '\n### %s\n' "$*"; }
pod() {   # name, command
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $ns}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
    - name: smi
      image: $image
      imagePullPolicy: IfNotPresent
      command: ["bash", "-lc", "$2"]
      resources: {limits: {nvidia.com/gpu: "1"}}
YAML
}
step "before: the node's allocatable nvidia.com/gpu, and who requests it"
kubectl get node prod102 -o jsonpath='allocatable nvidia.com/gpu={.status.allocatable.nvidia\.com/gpu}{"\n"}'
kubectl describe node prod102 | sed -n '/Allocated resources/,/Events/p'

units=$(kubectl get node prod102 -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')
# One hold pod per unit (the seed's node had one: gpu-demo-hold); each must see only its own GPU.
holds=(gpu-demo-hold)
[ "$units" -gt 1 ] && mapfile -t holds < <(seq -f 'gpu-demo-hold-%g' 0 $((units - 1)))
step "first task: ${holds[*]} (every one of the node's $units unit(s))"
start=$(date +%s%N)
for hold in "${holds[@]}"; do
  pod "$hold" "trap 'exit 0' TERM; nvidia-smi -L; env | grep NVIDIA; sleep 180 & wait" | kubectl apply -f -
done
for hold in "${holds[@]}"; do kubectl -n $ns wait --for=condition=Ready "pod/$hold" --timeout=120s; done
echo "Running after $(( ($(date +%s%N) - start) / 1000000 )) ms"
kubectl -n $ns get events --field-selector "involvedObject.name=${holds[0]}" --sort-by=.lastTimestamp
sleep 1
for hold in "${holds[@]}"; do echo "--- $hold"; kubectl -n $ns logs "$hold"; done

step "the node's ledger now"
kubectl describe node prod102 | sed -n '/Allocated resources/,/Events/p'

step "second task: gpu-demo-queue"
pod gpu-demo-queue "nvidia-smi -L" | kubectl apply -f -
sleep 3
kubectl -n $ns get pods "${holds[@]}" gpu-demo-queue -o wide
kubectl -n $ns get events --field-selector involvedObject.name=gpu-demo-queue,reason=FailedScheduling -o jsonpath='{range .items[*]}{.reason}{"\n"}{.message}{"\n"}{end}'

step "delete the first, the second goes"
kubectl -n $ns delete pod "${holds[0]}" --wait=true
kubectl -n $ns wait --for=jsonpath='{.status.phase}'=Succeeded pod/gpu-demo-queue --timeout=120s
kubectl -n $ns get events --field-selector involvedObject.name=gpu-demo-queue --sort-by=.lastTimestamp
kubectl -n $ns logs gpu-demo-queue

step "cleanup"
kubectl -n $ns delete pod gpu-demo-queue "${holds[@]:1}" --wait=true
kubectl get node prod102 -o jsonpath='allocatable nvidia.com/gpu={.status.allocatable.nvidia\.com/gpu}{"\n"}'
kubectl describe node prod102 | sed -n '/Allocated resources/,/Events/p'
kubectl -n $ns get pods
