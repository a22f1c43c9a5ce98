// Command kstatus prints the kstatus verdict (sigs.k8s.io/cli-utils/pkg/kstatus/status,
// the status that `kubectl wait`-like tools, Flux and kpt compute) of Kubernetes objects,
// one JSON line per object, for lookout's tests to compare with their own reading.
//
//	kubectl get clusters -A -o json | kstatus
//	kubectl get clusters -A -w --output-watch-events -o json | kstatus
//	kstatus --kubeconfig F --resource GROUP/VERSION/PLURAL [--namespace NS]
//
// Standard input: a stream of JSON values, one per line or pretty-printed (as
// `kubectl get -o json` writes them). Each value is an object, a list (`kind: List` or
// `*List`, with `items`; the items of an API list such as `ClusterList` get the list's
// apiVersion and the kind without `List` when they lack them), or a watch event
// (`{"type": "ADDED", "object": {...}}`, as `--output-watch-events` writes them). Each
// line is flushed as soon as its value is read, so a watch can be followed live.
//
// Output, one line per object:
//
//	{"kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}
//
// plus `"event":"ADDED"` for a watch event, and `"error":"..."` (status "Unknown") when
// kstatus cannot compute a status for that object. status is one of InProgress, Failed,
// Current, Terminating, Unknown (kstatus' NotFound is never printed: only given objects
// are read).
//
// Exit status: 0; 1 if the input is not JSON, a value is neither an object, a list nor a
// watch event, or (--resource) the list fails; 2 on a usage error.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

const usage = `usage:
  kstatus < objects.json
  kstatus --kubeconfig FILE --resource GROUP/VERSION/PLURAL [--namespace NS] [--timeout 30s]

Prints one JSON line per object: {"kind","namespace","name","status","message"}
(status: Current, InProgress, Failed, Terminating, Unknown), computed by
sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute.

Standard input: JSON objects, lists (List or *List with items) or watch events
({"type","object"}), one per line or pretty-printed (kubectl get -o json).

--resource: the core group is empty or "core" (/v1/pods, core/v1/pods, v1/pods).
--kubeconfig defaults to $KUBECONFIG. Without --namespace, all namespaces.
`

// Line is one output line.
type Line struct {
	Event     string `json:"event,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message"`
	Error     string `json:"error,omitempty"`
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kstatus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	kubeconfig := fs.String("kubeconfig", "", "")
	resource := fs.String("resource", "", "")
	namespace := fs.String("namespace", "", "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "kstatus: unexpected argument %q\n%s", fs.Arg(0), usage)
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	if *resource == "" {
		if *kubeconfig != "" || *namespace != "" {
			fmt.Fprintf(stderr, "kstatus: --kubeconfig and --namespace need --resource\n%s", usage)
			return 2
		}
		if err := fromReader(stdin, out); err != nil {
			out.Flush()
			fmt.Fprintf(stderr, "kstatus: %v\n", err)
			return 1
		}
		return 0
	}
	gvr, err := parseResource(*resource)
	if err != nil {
		fmt.Fprintf(stderr, "kstatus: %v\n%s", err, usage)
		return 2
	}
	if err := fromAPI(*kubeconfig, gvr, *namespace, *timeout, out); err != nil {
		out.Flush()
		fmt.Fprintf(stderr, "kstatus: %v\n", err)
		return 1
	}
	return 0
}

// parseResource reads GROUP/VERSION/PLURAL; the core group is "", "core" or left out.
func parseResource(s string) (schema.GroupVersionResource, error) {
	parts := strings.Split(s, "/")
	var gvr schema.GroupVersionResource
	switch len(parts) {
	case 2:
		gvr = schema.GroupVersionResource{Version: parts[0], Resource: parts[1]}
	case 3:
		gvr = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		if gvr.Group == "core" {
			gvr.Group = ""
		}
	default:
		return gvr, fmt.Errorf("--resource %q: want GROUP/VERSION/PLURAL", s)
	}
	if gvr.Version == "" || gvr.Resource == "" {
		return gvr, fmt.Errorf("--resource %q: want GROUP/VERSION/PLURAL", s)
	}
	return gvr, nil
}

func fromAPI(kubeconfig string, gvr schema.GroupVersionResource, ns string, timeout time.Duration, out *bufio.Writer) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	list, err := client.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", gvr.String(), err)
	}
	for i := range list.Items {
		if err := emit(out, "", &list.Items[i]); err != nil {
			return err
		}
	}
	return out.Flush()
}

// fromReader reads JSON values until EOF, printing a line per object.
func fromReader(r io.Reader, out *bufio.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	dec.UseNumber()
	for n := 1; ; n++ {
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("input value %d: %w", n, err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("input value %d: not a JSON object", n)
		}
		if err := value(out, obj); err != nil {
			return fmt.Errorf("input value %d: %w", n, err)
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
}

// value prints the lines of one input value: an object, a list or a watch event.
func value(out *bufio.Writer, obj map[string]any) error {
	obj = numbers(obj).(map[string]any)
	kind, _ := obj["kind"].(string)
	if kind == "" {
		// A watch event: {"type": "ADDED", "object": {...}}.
		typ, okT := obj["type"].(string)
		inner, okO := obj["object"].(map[string]any)
		if okT && okO {
			return emit(out, typ, &unstructured.Unstructured{Object: inner})
		}
		return errors.New("no kind: neither an object, a list nor a watch event")
	}
	if items, ok := obj["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		apiVersion, _ := obj["apiVersion"].(string)
		itemKind := strings.TrimSuffix(kind, "List")
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("items[%d]: not a JSON object", i)
			}
			u := &unstructured.Unstructured{Object: m}
			// An API list (ClusterList) leaves apiVersion and kind out of its items;
			// kubectl's List has them in each item.
			if kind != "List" {
				if u.GetAPIVersion() == "" {
					u.SetAPIVersion(apiVersion)
				}
				if u.GetKind() == "" {
					u.SetKind(itemKind)
				}
			}
			if err := emit(out, "", u); err != nil {
				return err
			}
		}
		return nil
	}
	return emit(out, "", &unstructured.Unstructured{Object: obj})
}

func emit(out *bufio.Writer, event string, u *unstructured.Unstructured) error {
	line := Line{Event: event, Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	if line.Kind == "" {
		return fmt.Errorf("object %q has no kind", u.GetName())
	}
	res, err := status.Compute(u)
	switch {
	case err != nil:
		line.Status, line.Error = string(status.UnknownStatus), err.Error()
	case res == nil:
		line.Status, line.Error = string(status.UnknownStatus), "kstatus returned no result"
	default:
		line.Status, line.Message = string(res.Status), res.Message
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = out.Write(b)
	return err
}

// numbers turns encoding/json's json.Number into int64 (or float64), as the
// apimachinery JSON decoder does: unstructured's NestedInt64 (observedGeneration,
// numberReady, …) wants int64, and a json.Number would make DeepCopy panic.
func numbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = numbers(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = numbers(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		if f, err := t.Float64(); err == nil {
			return f
		}
		return t.String()
	default:
		return v
	}
}
