#!/usr/bin/env bash
# The walkthrough as a user would script it with kubectl alone (watch-based `kubectl wait`): the
# reference that `make bench` compares playbooks/gpu_demo.yml against. Prints one JSON line of timings.
# Usage: gpu_demo_kubectl.sh NODE [NAMESPACE] [RESOURCE]   (KUBECONFIG and KUBECTL from the environment)
set -euo pipefail
node=$1 namespace=${2:-gpu-operator} resource=${3:-nvidia.com/gpu}
kubectl=${KUBECTL:-kubectl}
now() { date +%s.%N; }

pod() {  # name, command
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $namespace, labels: {app: gpu-demo-reference}}
spec:
  restartPolicy: Never
  priorityClassName: gpuops-preflight-no-preempt
  terminationGracePeriodSeconds: 1
  activeDeadlineSeconds: 600
  nodeSelector: {kubernetes.io/hostname: $node}
  containers:
    - name: smi
      image: docker.m.daocloud.io/vllm/vllm-openai:latest
      imagePullPolicy: IfNotPresent
      command: ["bash", "-c", "$2"]
      resources: {limits: {$resource: "1"}}
YAML
}

# The Priority admission plugin only accepts preemptionPolicy Never through a PriorityClass.
$kubectl apply -f - >/dev/null <<YAML
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gpuops-preflight-no-preempt}
value: 0
preemptionPolicy: Never
globalDefault: false
description: GPU pre-flight pods never preempt anything.
YAML

start=$(now)
pod gpu-demo-hold "nvidia-smi -L; env | grep NVIDIA || true; sleep 300" | $kubectl apply -f - >/dev/null
$kubectl -n "$namespace" wait pod/gpu-demo-hold --for=jsonpath='{.status.phase}'=Running --timeout=120s >/dev/null
$kubectl -n "$namespace" logs gpu-demo-hold >/dev/null
pod gpu-demo-queue "nvidia-smi -L" | $kubectl apply -f - >/dev/null
$kubectl -n "$namespace" wait pod/gpu-demo-queue --for=jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}'=Unschedulable --timeout=120s >/dev/null
$kubectl -n "$namespace" get events --field-selector involvedObject.name=gpu-demo-queue,reason=FailedScheduling -o name >/dev/null
$kubectl -n "$namespace" delete pod gpu-demo-hold --wait=true >/dev/null
$kubectl -n "$namespace" wait pod/gpu-demo-queue --for=jsonpath='{.status.phase}'=Succeeded --timeout=120s >/dev/null
$kubectl -n "$namespace" logs gpu-demo-queue >/dev/null
$kubectl -n "$namespace" delete pod gpu-demo-queue --wait=true >/dev/null
end=$(now)
# From the hold's creation to the queue's deletion: the time the node's GPUs were out of the scheduler's hands.
awk -v start="$start" -v end="$end" 'BEGIN { printf "{\"occupied_s\": %.3f}\n", end - start }'
