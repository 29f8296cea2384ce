// gpuops-simnode: the simulated parts of a real kubelet node, for the gpuops.scheduling test cluster.
//
// The kubelet is the real one (built from k8s.io/kubernetes). Only two things around it are simulated:
//
//	gpuops-simnode runtime  a CRI v1 runtime (RuntimeService + ImageService on a unix socket) that runs each
//	                        container's command as a local process, PID 1 of its own PID namespace
//	gpuops-simnode plugin   a device plugin (deviceplugin/v1beta1) that advertises a topology's GPUs (or, on a
//	                        GPU machine, the real ones) to the kubelet and answers Allocate as NVIDIA's plugin does
//	gpuops-simnode dra-driver  a DRA kubelet plugin (driver gpu.nvidia.com) that publishes the node's GPUs as
//	                        ResourceSlices and prepares claims with CDI specs, as NVIDIA's DRA driver does
//	gpuops-simnode container-init  (run by the runtime on a GPU machine) a container's private /dev with only
//	                        its own GPUs, then the container's command
//
// Written in Go against the published API types (k8s.io/cri-api, k8s.io/kubelet), from the same module cache as
// the control plane, so the kubelet talks to them exactly as it talks to containerd and NVIDIA's plugin.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gpuops-simnode runtime|plugin|dra-driver [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "runtime":
		err = runRuntime(os.Args[2:])
	case "plugin":
		err = runPlugin(os.Args[2:])
	case "dra-driver":
		err = runDRADriver(os.Args[2:])
	case "container-init":
		err = runContainerInit(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want runtime, plugin or dra-driver", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpuops-simnode:", err)
		os.Exit(1)
	}
}
