package main

import (
	"bytes"
	"strings"
	"testing"
)

func runStdin(t *testing.T, in string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(in), &out, &errb)
	return out.String(), errb.String(), code
}

const ready = `{"apiVersion":"demo.lookout.dev/v1","kind":"Cluster","metadata":{"name":"c1","namespace":"default","generation":2},"status":{"observedGeneration":2}}`

func TestInputShapes(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"one object": {
			ready,
			`{"kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}`,
		},
		"generation not observed": {
			`{"apiVersion":"demo.lookout.dev/v1","kind":"Cluster","metadata":{"name":"c1","namespace":"default","generation":3},"status":{"observedGeneration":2}}`,
			`{"kind":"Cluster","namespace":"default","name":"c1","status":"InProgress","message":"Cluster generation is 3, but latest observed generation is 2"}`,
		},
		"stalled": {
			`{"apiVersion":"demo.lookout.dev/v1","kind":"Cluster","metadata":{"name":"c1","namespace":"ns"},"status":{"conditions":[{"type":"Stalled","status":"True","reason":"R","message":"stuck"}]}}`,
			`{"kind":"Cluster","namespace":"ns","name":"c1","status":"Failed","message":"stuck"}`,
		},
		"terminating": {
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"m","namespace":"default","deletionTimestamp":"2026-01-01T00:00:00Z"}}`,
			`{"kind":"ConfigMap","namespace":"default","name":"m","status":"Terminating","message":"Resource scheduled for deletion"}`,
		},
		"kubectl List, pretty-printed": {
			"{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    " + ready + "\n  ],\n  \"metadata\": {\"resourceVersion\": \"\"}\n}\n",
			`{"kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}`,
		},
		"API list: items without kind": {
			`{"apiVersion":"apps/v1","kind":"DaemonSetList","items":[{"metadata":{"name":"d","namespace":"default","generation":1},"status":{"observedGeneration":1,"desiredNumberScheduled":2,"currentNumberScheduled":2,"updatedNumberScheduled":2,"numberAvailable":1,"numberReady":2}}]}`,
			`{"kind":"DaemonSet","namespace":"default","name":"d","status":"InProgress","message":"Available: 1/2"}`,
		},
		"empty list": {`{"apiVersion":"v1","kind":"List","items":[]}`, ``},
		"watch events": {
			`{"type":"ADDED","object":` + ready + "}\n" + `{"type":"DELETED","object":` + ready + "}\n",
			`{"event":"ADDED","kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}` + "\n" +
				`{"event":"DELETED","kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}`,
		},
		"several objects, one per line": {
			ready + "\n" + strings.Replace(ready, `"c1"`, `"c2"`, 1) + "\n",
			`{"kind":"Cluster","namespace":"default","name":"c1","status":"Current","message":"Resource is current"}` + "\n" +
				`{"kind":"Cluster","namespace":"default","name":"c2","status":"Current","message":"Resource is current"}`,
		},
		"a bad field is that object's error": {
			`{"apiVersion":"v1","kind":"X","metadata":{"name":"x","generation":"two"}}`,
			`{"kind":"X","namespace":"","name":"x","status":"Unknown","message":"","error":"looking up metadata.generation from resource: .metadata.generation accessor error: two is of the type string, expected int64"}`,
		},
		"nothing": {"", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, errs, code := runStdin(t, c.in)
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			want := c.want
			if want != "" {
				want += "\n"
			}
			if out != want {
				t.Fatalf("got\n%s\nwant\n%s", out, want)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	for _, in := range []string{`[1]`, `{"kind":`, `{"metadata":{}}`, `{"apiVersion":"v1","kind":"List","items":[1]}`} {
		out, errs, code := runStdin(t, in)
		if code != 1 || !strings.HasPrefix(errs, "kstatus: input value 1: ") {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", in, code, out, errs)
		}
	}
	// Lines already read are printed before the error.
	out, _, code := runStdin(t, ready+"\n{")
	if code != 1 || !strings.Contains(out, `"name":"c1"`) {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"x"}, {"--namespace", "a"}, {"--resource", "pods"}, {"--resource", "a/b/c/d"}, {"--nope"}} {
		if _, _, code := runStdin(t, "", args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestParseResource(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/pods":                     "/v1, Resource=pods",
		"core/v1/pods":                 "/v1, Resource=pods",
		"v1/pods":                      "/v1, Resource=pods",
		"apps/v1/daemonsets":           "apps/v1, Resource=daemonsets",
		"demo.lookout.dev/v1/clusters": "demo.lookout.dev/v1, Resource=clusters",
	} {
		got, err := parseResource(in)
		if err != nil || got.String() != want {
			t.Fatalf("%s: %v %v, want %s", in, got, err, want)
		}
	}
}
