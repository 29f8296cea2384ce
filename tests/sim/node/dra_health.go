package main

// The DRA driver's device health service (KEP-4680; k8s.io/kubelet/pkg/apis/dra-health/v1alpha1, DRAResourceHealth).
// What the v1.36 kubelet expects (pkg/kubelet/cm/dra): the service on the driver's own DRA socket (the kubeletplugin
// helper registers it there, and advertises it in GetInfo, when the driver implements it); the kubelet opens
// NodeWatchResources as soon as the driver registers, and again every 5 s while the call fails or the stream ends;
// each report names devices by pool and device name; a device not heard of for its health check timeout (30 s unless
// the report sets one) turns Unknown; the kubelet writes the health of a claim's devices into the status of the pods
// that hold the claim (containerStatuses[].allocatedResourcesStatus, "claim:<pod claim>/<request>").
//
// As NVIDIA's gpu-kubelet-plugin reports it with its NVML health monitor (driver gate NVMLDeviceHealthCheck, alpha;
// the report to the kubelet is kubernetes-sigs/dra-driver-nvidia-gpu pull request 1243): every device starts Healthy; a
// critical XID or a lost GPU makes it Unhealthy with a message ("critical XID 79 reported by NVML", "GPU is lost"); a
// device the monitor does not watch is Unknown ("device health is not monitored"); the whole report is sent again on
// a heartbeat (NVIDIA's: 15 s) so that the kubelet's data never goes stale. Here the faults file plays NVML
// ({"dra_health": {"gpu-1": {"xid": 79}}}). Unlike NVIDIA's driver, where Unhealthy lasts until the driver restarts,
// a device heals when its fault goes, so a test can put the node back as with the other faults.
// Written from the API and from reading NVIDIA's code, not from NVIDIA's code.

import (
	"fmt"
	"log"
	"reflect"
	"time"

	"google.golang.org/grpc"
	drahealth "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// draHealthFault: the health NVML would report for one device.
type draHealthFault struct {
	// "Unhealthy" (the default) or "Unknown" (a device the monitor does not watch).
	Health string `json:"health"`
	// The critical XID behind Unhealthy; none (0) means the GPU is lost.
	XID int `json:"xid"`
}

var (
	// How often the whole report is sent again although nothing changed: well within the kubelet's 30 s.
	draHealthHeartbeat = 10 * time.Second
	// How often the faults file is read for a change (as the slice's taints are).
	draHealthPoll = 500 * time.Millisecond
)

func (fault draHealthFault) status() (drahealth.HealthStatus, string) {
	switch {
	case fault.Health == "Unknown":
		return drahealth.HealthStatus_UNKNOWN, "device health is not monitored"
	case fault.XID != 0:
		return drahealth.HealthStatus_UNHEALTHY, fmt.Sprintf("critical XID %d reported by NVML", fault.XID)
	default:
		return drahealth.HealthStatus_UNHEALTHY, "GPU is lost"
	}
}

// healthReport: every published device, with the health the faults give it (Healthy if none).
func (d *draDriver) healthReport(faults map[string]draHealthFault, now time.Time) *drahealth.NodeWatchResourcesResponse {
	report := &drahealth.NodeWatchResourcesResponse{}
	for _, device := range d.ordered {
		health, message := drahealth.HealthStatus_HEALTHY, ""
		if fault, ok := faults[device.name]; ok {
			health, message = fault.status()
		}
		report.Devices = append(report.Devices, &drahealth.DeviceHealth{
			Device: &drahealth.DeviceIdentifier{PoolName: d.node, DeviceName: device.name},
			Health: health, LastUpdatedTime: now.Unix(), Message: message})
	}
	return report
}

// NodeWatchResources streams the node's device health to the kubelet: at once, on every change, and on the heartbeat.
func (d *draDriver) NodeWatchResources(_ *drahealth.NodeWatchResourcesRequest, stream grpc.ServerStreamingServer[drahealth.NodeWatchResourcesResponse]) error {
	poll := time.NewTicker(draHealthPoll)
	defer poll.Stop()
	var sent map[string]draHealthFault
	var sentAt time.Time
	for first := true; ; first = false {
		faults := d.faults().Health
		if now := time.Now(); first || !reflect.DeepEqual(faults, sent) || now.Sub(sentAt) >= draHealthHeartbeat {
			if err := stream.Send(d.healthReport(faults, now)); err != nil {
				return err
			}
			if !first && !reflect.DeepEqual(faults, sent) {
				log.Printf("dra-driver: device health now %v", faults)
			}
			sent, sentAt = faults, now
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-poll.C:
		}
	}
}
