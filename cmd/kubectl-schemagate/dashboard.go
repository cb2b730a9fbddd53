package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

type dashboardOptions struct {
	allNamespaces bool
	port          int
	address       string
	readOnly      bool
}

func newDashboardCommand(a *app) *cobra.Command {
	o := &dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve a local web page that follows the RoutingServices of a namespace (or all) and sets their controls",
		Long: `Serve a web page on this machine that shows every RoutingService of the namespace (-A: of every
namespace) as get does, live: status, schema gate and lifecycle, each shard's step and countdown,
its ReplicaSets and pods, the checks' measurements against their thresholds, a timeline of Jobs,
Events, steps and conditions, and the plan of the live spec. Its buttons pause, resume, promote,
abort and retry (and approve a contract) with the same patches as the commands of those names.

It uses your kubeconfig and your permissions, nothing else: it watches routingservices and the
replicasets, jobs, pods (labelled schemagate.io/name) and events (of RoutingServices) in scope;
the controls need patch on routingservices. It listens on loopback only and prints a URL that
carries a random key: only a browser that opened that URL gets in. --read-only hides the controls.
It serves until Ctrl-C. See docs/dashboard.md.`,
		Example: `  kubectl schemagate dashboard
  kubectl schemagate dashboard -A --port 8001
  kubectl schemagate dashboard -n edge --read-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return a.runDashboard(ctx, o)
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "show the RoutingServices of every namespace")
	cmd.Flags().IntVar(&o.port, "port", 0, "port to listen on (0: any free port)")
	cmd.Flags().StringVar(&o.address, "address", "127.0.0.1", "loopback address to listen on: an address in 127.0.0.0/8, or ::1")
	cmd.Flags().BoolVar(&o.readOnly, "read-only", false, "no controls: the page hides them and the server refuses them")
	return cmd
}

// loopbackAddress parses --address: an IP in 127.0.0.0/8 or ::1, nothing else. The dashboard
// acts with the caller's credentials; another machine must never reach it.
func loopbackAddress(s string) (net.IP, error) {
	ip := net.ParseIP(strings.Trim(s, "[]"))
	switch {
	case ip == nil:
		return nil, fmt.Errorf("--address %q is not an IP address: use a loopback address such as 127.0.0.1 or ::1", s)
	case ip.To4() != nil && ip.To4()[0] == 127 && !strings.Contains(s, ":"):
		return ip.To4(), nil
	case ip.Equal(net.IPv6loopback) && strings.Contains(s, ":"):
		return ip, nil
	}
	return nil, fmt.Errorf("--address %s is not a loopback address: the dashboard acts with your credentials, so it listens on 127.0.0.0/8 or ::1 only "+
		"(reach it from elsewhere through an SSH tunnel)", s)
}

func (a *app) runDashboard(ctx context.Context, o *dashboardOptions) error {
	ip, err := loopbackAddress(o.address)
	if err != nil {
		return err
	}
	if o.port < 0 || o.port > 65535 {
		return fmt.Errorf("--port %d is not a port (0 to 65535)", o.port)
	}
	ns := ""
	if !o.allNamespaces {
		if ns, err = a.namespace(); err != nil {
			return err
		}
	}
	cl, err := a.connect()
	if err != nil {
		return err
	}
	if err := cl.checkAPI(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFeed(cl, ns, a.now, o.readOnly)
	if err := f.start(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), strconv.Itoa(o.port)))
	if err != nil {
		return err
	}
	d, err := newDashServer(ln.Addr().String(), ns, o.readOnly, f.broker, a.dashboardControl(cl))
	if err != nil {
		_ = ln.Close()
		return err
	}
	go f.run(ctx)
	scope := "namespace " + ns
	if ns == "" {
		scope = "every namespace"
	}
	fmt.Fprintf(a.streams.Out, "The schemagate dashboard of %s is at\n\n  %s\n\nThe URL carries its key: keep it to yourself. Ctrl-C stops it.\n", scope, d.URL())
	return serveUntil(ctx, ln, d)
}

// serveUntil serves h on ln until ctx ends, then closes the open streams.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// dashboardControl runs a control the way the command of the same name does (pauseIn,
// annotateIn: the same patch, field manager and annotation value), capturing what it prints.
func (a *app) dashboardControl(cl *clients) controlFunc {
	return func(ctx context.Context, ns, name, action string) (string, string, error) {
		var out, errOut bytes.Buffer
		var err error
		switch action {
		case "pause", "resume":
			err = a.pauseIn(ctx, cl, ns, name, action == "pause", &out, &errOut)
		default:
			act, ok := annotateActions[action]
			if !ok {
				return "", "", fmt.Errorf("unknown action %q", action)
			}
			err = a.annotateIn(ctx, cl, ns, name, act, &out, &errOut)
		}
		return out.String(), strings.TrimSpace(strings.TrimPrefix(errOut.String(), "warning: ")), err
	}
}
