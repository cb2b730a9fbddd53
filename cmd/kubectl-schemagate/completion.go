package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completionTimeout bounds a completion's requests: a shell must not hang on a slow cluster.
const completionTimeout = 5 * time.Second

// completeNames completes the NAME argument with the RoutingServices of the namespace (-n, or
// the context's).
func (a *app) completeNames(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, err := a.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	cl, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	list, err := cl.dyn.Resource(rsvcGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var names []string
	for _, u := range list.Items {
		if strings.HasPrefix(u.GetName(), toComplete) {
			names = append(names, u.GetName())
		}
	}
	sort.Strings(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// registerFlagCompletions completes -n with the cluster's namespaces and --context with the
// kubeconfig's contexts.
func registerFlagCompletions(root *cobra.Command, a *app) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cl, err := a.connect()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		list, err := cl.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []string
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, toComplete) {
				names = append(names, n.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("context", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cfg, err := a.flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var names []string
		for name := range cfg.Contexts {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	})
}

func newCompletionCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print the shell completion script for bash, zsh or fish",
		Long: `Print the shell completion script for bash, zsh or fish. It completes commands, flags,
RoutingService names (of the namespace given with -n, or the context's), namespaces and contexts.

For the plugin's own name:
  source <(kubectl-schemagate completion bash)              # bash
  kubectl-schemagate completion zsh > "${fpath[1]}/_kubectl-schemagate"   # zsh
  kubectl-schemagate completion fish | source               # fish

For "kubectl schemagate ..." (kubectl 1.26 and later complete plugins through a helper on PATH):
  cat > ~/bin/kubectl_complete-schemagate <<'EOF'
  #!/usr/bin/env sh
  exec kubectl-schemagate __complete "$@"
  EOF
  chmod +x ~/bin/kubectl_complete-schemagate`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return fmt.Errorf("unsupported shell %q", args[0])
		},
	}
}
