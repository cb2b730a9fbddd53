package nodeagent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// configError is a container that cannot be configured (a missing ConfigMap key, an unsupported
// reference): the kubelet leaves it waiting with reason CreateContainerConfigError.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &configError{fmt.Sprintf(format, args...)}
}

// podEnv is what a container's environment is built from besides its spec.
type podEnv struct {
	pod        *corev1.Pod
	podIP      string
	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
}

// environment builds a container's environment as the kubelet does (envFrom, then env in order,
// each value expanding $(VAR) references to variables defined before it), on top of a base the
// agent provides: PATH, HOSTNAME, POD_IP, TERMINATION_MESSAGE_PATH and the image's own Env.
func (pe podEnv) environment(c *corev1.Container, image Executable, terminationLog string) ([]string, map[string]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH", os.Getenv("PATH"))
	set("HOSTNAME", pe.pod.Name)
	set("POD_IP", pe.podIP)
	set("TERMINATION_MESSAGE_PATH", terminationLog)
	for _, kv := range image.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	for _, from := range c.EnvFrom {
		data, err := pe.envFrom(from)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v := expand(e.Value, vars)
		if e.ValueFrom != nil {
			var err error
			if v, err = pe.valueFrom(c, e.ValueFrom); err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		set(e.Name, v)
	}
	env := make([]string, 0, len(order))
	for _, k := range order {
		env = append(env, k+"="+vars[k])
	}
	return env, vars, nil
}

var labelRef = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

func (pe podEnv) valueFrom(c *corev1.Container, src *corev1.EnvVarSource) (string, error) {
	switch {
	case src.FieldRef != nil:
		p := pe.pod
		switch path := src.FieldRef.FieldPath; path {
		case "metadata.name":
			return p.Name, nil
		case "metadata.namespace":
			return p.Namespace, nil
		case "metadata.uid":
			return string(p.UID), nil
		case "spec.nodeName":
			return p.Spec.NodeName, nil
		case "spec.serviceAccountName":
			return p.Spec.ServiceAccountName, nil
		case "status.podIP", "status.podIPs":
			return pe.podIP, nil
		case "status.hostIP", "status.hostIPs":
			return hostIP, nil
		default:
			if m := labelRef.FindStringSubmatch(path); m != nil {
				if m[1] == "labels" {
					return p.Labels[m[2]], nil
				}
				return p.Annotations[m[2]], nil
			}
			return "", configErrorf("unsupported fieldRef %q", path)
		}
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := pe.configMaps.ConfigMaps(pe.pod.Namespace).Get(ref.Name)
		if err == nil {
			if v, ok := cm.Data[ref.Key]; ok {
				return v, nil
			}
			if v, ok := cm.BinaryData[ref.Key]; ok {
				return string(v), nil
			}
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", configErrorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pe.pod.Namespace, ref.Name)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := pe.secrets.Secrets(pe.pod.Namespace).Get(ref.Name)
		if err == nil {
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), nil
			}
		}
		if ref.Optional != nil && *ref.Optional {
			return "", nil
		}
		return "", configErrorf("couldn't find key %s in Secret %s/%s", ref.Key, pe.pod.Namespace, ref.Name)
	default:
		return "", configErrorf("unsupported env source in container %s (resourceFieldRef and fileKeyRef are not implemented)", c.Name)
	}
}

func (pe podEnv) envFrom(from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := pe.configMaps.ConfigMaps(pe.pod.Namespace).Get(from.ConfigMapRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil, nil
			}
			return nil, configErrorf("configmap %q not found", from.ConfigMapRef.Name)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := pe.secrets.Secrets(pe.pod.Namespace).Get(from.SecretRef.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil, nil
			}
			return nil, configErrorf("secret %q not found", from.SecretRef.Name)
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// argv is the command line of container c of an image run as exe, with Kubernetes semantics:
// command replaces the image's entrypoint (and drops its default arguments), args replace the
// default arguments; both expand $(VAR). The entrypoint is exe.Path; a command naming it (by path
// or base name) runs exe.Path, any other command runs that program from the host.
func argv(c *corev1.Container, exe Executable, vars map[string]string) ([]string, error) {
	var out []string
	if len(c.Command) > 0 {
		for _, s := range c.Command {
			out = append(out, expand(s, vars))
		}
		switch {
		case out[0] == exe.Path || filepath.Base(out[0]) == filepath.Base(exe.Path):
			out[0] = exe.Path
		default:
			p, err := exec.LookPath(out[0])
			if err != nil {
				return nil, err
			}
			out[0] = p
		}
	} else {
		out = append([]string{exe.Path}, exe.Args...)
	}
	if len(c.Args) > 0 {
		if len(c.Command) == 0 {
			out = out[:1]
		}
		for _, s := range c.Args {
			out = append(out, expand(s, vars))
		}
	}
	return out, nil
}

// expand replaces $(VAR) with the variable's value when it is defined, leaves it as written
// otherwise, and turns $$ into $, as the kubelet does.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
