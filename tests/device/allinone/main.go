// The control plane, the kubelet and kubectl in one binary, chosen by the name it is called by (as hyperkube
// was): the pieces share most of their code, so one binary is a fraction of five, which is what lets the
// device bundle fit the GPU machine's 64 MiB transfer. Each branch is the upstream cmd/<name>/main.go.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	_ "time/tzdata" // for CronJob time zones, as kube-apiserver and kube-controller-manager have

	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	var command *cobra.Command
	switch name {
	case "kube-apiserver":
		command = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		command = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		command = scheduler.NewSchedulerCommand()
	case "kubelet":
		command = kubelet.NewKubeletCommand(context.Background())
	case "kubectl":
		command = kubectl.NewDefaultKubectlCommand()
		if err := cli.RunNoErrOutput(command); err != nil {
			os.Exit(1)
		}
		return
	default:
		fmt.Fprintf(os.Stderr, "%s: call me as kube-apiserver, kube-controller-manager, kube-scheduler, kubelet or kubectl\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(command))
}
