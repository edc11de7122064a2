// Package podsecurity is a validating webhook for Pods with eight controls
// of the Pod Security Standards baseline level, written the way a
// controller-runtime user writes one: a typed admission.Validator for
// *corev1.Pod.
//
// The controls, their order and their messages are those of the same rules
// in katalogs/pod-security-baseline.yaml (copied into
// benches/peers/pod-security-subset.yaml): a denial lists every failing
// control as "[rule] message", joined with "; ".
package podsecurity

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Controls names the rules checked, in order.
var Controls = []string{
	"host-namespaces",
	"privileged",
	"capabilities",
	"host-path-volumes",
	"host-ports",
	"proc-mount",
	"seccomp",
	"sysctls",
}

// Baseline validates Pods.
type Baseline struct{}

var _ admission.Validator[*corev1.Pod] = Baseline{}

// ValidateCreate checks a new Pod.
func (Baseline) ValidateCreate(_ context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	return nil, check(pod)
}

// ValidateUpdate checks an updated Pod unless only its metadata changed
// (Pod Security admission lets those through, so that old pods can be
// labelled).
func (Baseline) ValidateUpdate(_ context.Context, oldPod, pod *corev1.Pod) (admission.Warnings, error) {
	if reflect.DeepEqual(oldPod.Spec, pod.Spec) {
		return nil, nil
	}
	return nil, check(pod)
}

// ValidateDelete allows every deletion.
func (Baseline) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

type container struct {
	name  string
	sc    *corev1.SecurityContext
	ports []corev1.ContainerPort
}

// containers lists init containers, containers and ephemeral containers,
// in that order (as Pod Security admission visits them).
func containers(spec *corev1.PodSpec) []container {
	out := make([]container, 0, len(spec.InitContainers)+len(spec.Containers)+len(spec.EphemeralContainers))
	for _, c := range spec.InitContainers {
		out = append(out, container{c.Name, c.SecurityContext, c.Ports})
	}
	for _, c := range spec.Containers {
		out = append(out, container{c.Name, c.SecurityContext, c.Ports})
	}
	for _, c := range spec.EphemeralContainers {
		out = append(out, container{c.Name, c.SecurityContext, c.Ports})
	}
	return out
}

func check(pod *corev1.Pod) error {
	all := containers(&pod.Spec)
	var failures []string
	for i, control := range []func(*corev1.Pod, []container) string{
		hostNamespaces, privileged, capabilities, hostPathVolumes, hostPorts, procMount, seccomp, sysctls,
	} {
		if msg := control(pod, all); msg != "" {
			failures = append(failures, "["+Controls[i]+"] "+msg)
		}
	}
	if len(failures) == 0 {
		return nil
	}
	return errors.New(strings.Join(failures, "; "))
}

func quoted(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sortedDistinct(items []string) []string {
	out := slices.Clone(items)
	slices.Sort(out)
	return slices.Compact(out)
}

func hostNamespaces(pod *corev1.Pod, _ []container) string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{{"hostNetwork", pod.Spec.HostNetwork}, {"hostPID", pod.Spec.HostPID}, {"hostIPC", pod.Spec.HostIPC}} {
		if f.on {
			set = append(set, f.name+"=true")
		}
	}
	if len(set) == 0 {
		return ""
	}
	return "host namespaces (" + strings.Join(set, ", ") + ")"
}

func privileged(_ *corev1.Pod, all []container) string {
	var bad []string
	for _, c := range all {
		if c.sc != nil && c.sc.Privileged != nil && *c.sc.Privileged {
			bad = append(bad, c.name)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "privileged (" + plural(len(bad), "container ", "containers ") + quoted(bad) +
		" must not set securityContext.privileged=true)"
}

// allowedCapabilities is the default set of the container runtimes.
var allowedCapabilities = []corev1.Capability{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
	"MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
	"SYS_CHROOT",
}

func capabilities(_ *corev1.Pod, all []container) string {
	var bad, caps []string
	for _, c := range all {
		if c.sc == nil || c.sc.Capabilities == nil {
			continue
		}
		var extra []string
		for _, a := range c.sc.Capabilities.Add {
			if !slices.Contains(allowedCapabilities, a) {
				extra = append(extra, string(a))
			}
		}
		if len(extra) > 0 {
			bad = append(bad, c.name)
			caps = append(caps, extra...)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "non-default capabilities (" + plural(len(bad), "container ", "containers ") + quoted(bad) +
		" must not include " + quoted(sortedDistinct(caps)) + " in securityContext.capabilities.add)"
}

func hostPathVolumes(pod *corev1.Pod, _ []container) string {
	var bad []string
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			bad = append(bad, v.Name)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "hostPath volumes (" + plural(len(bad), "volume ", "volumes ") + quoted(bad) + ")"
}

func hostPorts(_ *corev1.Pod, all []container) string {
	var bad, ports []string
	for _, c := range all {
		used := false
		for _, p := range c.ports {
			if p.HostPort != 0 {
				used = true
				ports = append(ports, strconv.Itoa(int(p.HostPort)))
			}
		}
		if used {
			bad = append(bad, c.name)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	ports = sortedDistinct(ports) // as strings, like the CEL rule
	return "hostPort (" + plural(len(bad), "container ", "containers ") + quoted(bad) +
		plural(len(bad), " uses ", " use ") + plural(len(ports), "hostPort ", "hostPorts ") +
		strings.Join(ports, ", ") + ")"
}

func procMount(pod *corev1.Pod, all []container) string {
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers {
		return "" // its own user namespace: any procMount (since v1.35)
	}
	var bad, types []string
	for _, c := range all {
		if c.sc != nil && c.sc.ProcMount != nil && *c.sc.ProcMount != corev1.DefaultProcMount {
			bad = append(bad, c.name)
			types = append(types, string(*c.sc.ProcMount))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return "procMount (" + plural(len(bad), "container ", "containers ") + quoted(bad) +
		" must not set securityContext.procMount to " + quoted(sortedDistinct(types)) +
		", or the pod must set hostUsers: false)"
}

func validSeccomp(p *corev1.SeccompProfile) bool {
	return p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost
}

func seccomp(pod *corev1.Pod, all []container) string {
	var who, types []string
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SeccompProfile != nil && !validSeccomp(sc.SeccompProfile) {
		who = append(who, "pod")
		types = append(types, string(sc.SeccompProfile.Type))
	}
	var bad []string
	for _, c := range all {
		if c.sc != nil && c.sc.SeccompProfile != nil && !validSeccomp(c.sc.SeccompProfile) {
			bad = append(bad, c.name)
			types = append(types, string(c.sc.SeccompProfile.Type))
		}
	}
	if len(bad) > 0 {
		who = append(who, plural(len(bad), "container ", "containers ")+quoted(bad))
	}
	if len(who) == 0 {
		return ""
	}
	return "seccompProfile (" + strings.Join(who, " and ") +
		" must not set securityContext.seccompProfile.type to " + quoted(sortedDistinct(types)) + ")"
}

// allowedSysctls is the namespaced, safe set of v1.37.
var allowedSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
	"net.ipv4.tcp_slow_start_after_idle",
	"net.ipv4.tcp_notsent_lowat",
}

func sysctls(pod *corev1.Pod, _ []container) string {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return ""
	}
	var bad []string
	for _, s := range sc.Sysctls {
		if !slices.Contains(allowedSysctls, s.Name) {
			bad = append(bad, s.Name)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return fmt.Sprintf("forbidden sysctls (%s)", strings.Join(bad, ", "))
}
