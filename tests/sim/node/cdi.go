package main

// CDI devices, resolved as containerd's CRI plugin resolves them: the names come from the CRI request's CDIDevices
// (a device plugin's cdi-cri answer, a DRA driver's prepared devices) and from the container's annotations under
// cdi.k8s.io/ (a device plugin's cdi-annotations answer), each name once; every name must be found in a CDI spec
// file in the node's spec folders (containerd's cdi_spec_dirs, /etc/cdi and /var/run/cdi by default), or the
// container is not created; the specs' edits (environment, device nodes, mounts) are applied to the container.
// The CDI library (tags.cncf.io/container-device-interface) does the reading and the injection, as in containerd.

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// cdiDeviceNames: the CDI devices a container asks for, in containerd's order (the CRI field first, then the
// annotations), each once.
func cdiDeviceNames(config *runtimeapi.ContainerConfig) ([]string, error) {
	seen := map[string]bool{}
	var names []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	for _, device := range config.GetCDIDevices() {
		add(device.GetName())
	}
	_, annotated, err := cdi.ParseAnnotations(config.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("failed to parse CDI device annotations: %w", err)
	}
	sort.Strings(annotated) // annotations are a map: a stable order
	for _, name := range annotated {
		add(name)
	}
	return names, nil
}

// cdiInjection is what the specs did to a container.
type cdiInjection struct {
	Env         []string    // the process environment after the specs' edits (a spec may set NVIDIA_VISIBLE_DEVICES=void)
	DeviceNodes []string    // container paths of the injected device nodes, e.g. /dev/nvidia0
	Mounts      []oci.Mount // the specs' mounts (driver libraries); the host's files are already where they point
	Hooks       []cdiHook   // the specs' OCI hooks (NVIDIA's name nvidia-cdi-hook), in the order runc runs them
}

// cdiHook is one OCI hook a CDI spec added: its kind (createContainer, ...), its place among the hooks of that kind
// (runc counts from 0) and the program it runs.
type cdiHook struct {
	Kind  string
	Index int
	Path  string
}

// hookKinds: the OCI hook kinds in the order runc runs them as it creates and starts a container.
var hookKinds = []string{"prestart", "createRuntime", "createContainer", "startContainer"}

// specHooks lists a spec's hooks by kind, in runc's order.
func specHooks(hooks *oci.Hooks) []cdiHook {
	if hooks == nil {
		return nil
	}
	byKind := map[string][]oci.Hook{"prestart": hooks.Prestart, "createRuntime": hooks.CreateRuntime, //nolint:staticcheck // runc still runs prestart hooks
		"createContainer": hooks.CreateContainer, "startContainer": hooks.StartContainer}
	var found []cdiHook
	for _, kind := range hookKinds {
		for index, hook := range byKind[kind] {
			found = append(found, cdiHook{Kind: kind, Index: index, Path: hook.Path})
		}
	}
	return found
}

// missingHook: runc's error for the first hook whose program is not there, as containerd reports it when the
// container starts (the container exits with 128, reason StartError, this message); nil when every hook's program
// exists. runc runs the hooks (ours does not): a spec naming a program the node lacks fails the container on a real
// node, and so it does here.
func missingHook(hooks []cdiHook) error {
	for _, hook := range hooks {
		if _, err := os.Stat(hook.Path); err != nil {
			return fmt.Errorf("failed to create shim task: OCI runtime create failed: runc create failed: unable to start "+
				"container process: error during container init: error running %s hook #%d: fork/exec %s: no such file "+
				"or directory: unknown", hook.Kind, hook.Index, hook.Path)
		}
	}
	return nil
}

// injectCDIDevices applies the named devices' specs, read from dirs, to a container whose environment is env.
// No names: nothing changes. A name found in no spec: an error naming it, as containerd's "CDI device injection
// failed: unresolvable CDI devices ...".
func injectCDIDevices(dirs []string, env []string, names []string) (*cdiInjection, error) {
	if len(names) == 0 {
		return &cdiInjection{Env: env}, nil
	}
	// A fresh cache per container: containerd refreshes its registry before each injection too, so a spec the
	// plugin (or a DRA driver) wrote a moment ago is seen. Errors in other vendors' files do not stop injection.
	cache, _ := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	spec := &oci.Spec{Process: &oci.Process{Env: append([]string{}, env...)}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, names...); err != nil {
		return nil, fmt.Errorf("CDI device injection failed: %w (spec folders %s%s)", err, strings.Join(dirs, ", "),
			specErrors(cache))
	}
	injection := &cdiInjection{Env: spec.Process.Env, Mounts: spec.Mounts, Hooks: specHooks(spec.Hooks)}
	for _, device := range spec.Linux.Devices {
		injection.DeviceNodes = append(injection.DeviceNodes, device.Path)
	}
	return injection, nil
}

func specErrors(cache *cdi.Cache) string {
	var lines []string
	for path, errs := range cache.GetErrors() {
		for _, err := range errs {
			lines = append(lines, fmt.Sprintf("%s: %v", path, err))
		}
	}
	if len(lines) == 0 {
		return ""
	}
	sort.Strings(lines)
	return "; spec errors: " + strings.Join(lines, "; ")
}

var gpuDeviceNode = regexp.MustCompile(`^/dev/nvidia([0-9]+)$`)

// gpuMinors: the GPU minor numbers of the /dev/nvidiaN nodes among paths (nvidiactl, nvidia-uvm and the
// MIG capability nodes are not GPUs).
func gpuMinors(paths []string) []int {
	var minors []int
	for _, path := range paths {
		if match := gpuDeviceNode.FindStringSubmatch(path); match != nil {
			minor, _ := strconv.Atoi(match[1])
			minors = append(minors, minor)
		}
	}
	return minors
}
