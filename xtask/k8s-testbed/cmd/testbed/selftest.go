package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

const selftestName = "testbed-selftest"

type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Kind     string `json:"kind"`
		Code     int    `json:"code"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"object"`
}

// firstWatchEvent opens a watch and returns its HTTP status and first event.
func firstWatchEvent(c *http.Client, url string) (int, *watchEvent, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var ev watchEvent
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("reading first watch event: %w", err)
	}
	return resp.StatusCode, &ev, nil
}

type deployment struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
	} `json:"spec"`
}

// cmdSelftest proves reads, writes, watches and the 410 procedure on a running testbed.
func cmdSelftest(dir string) error {
	st, err := loadState(dir)
	if err != nil {
		return fmt.Errorf("no testbed in %s (%v)", dir, err)
	}
	c, err := st.apiClient(10 * time.Second)
	if err != nil {
		return err
	}
	wc, err := st.apiClient(0)
	if err != nil {
		return err
	}
	base := st.APIServerURL + "/apis/apps/v1"
	coll := base + "/namespaces/default/deployments"

	code, body, err := httpDo(c, "GET", base+"/deployments", "", nil)
	if err != nil || code != 200 {
		return fmt.Errorf("GET /apis/apps/v1/deployments: HTTP %d %v %s", code, err, body)
	}
	fmt.Println("ok   GET /apis/apps/v1/deployments -> 200")

	_, _, _ = httpDo(c, "DELETE", coll+"/"+selftestName, "", nil)
	manifest := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment",
 "metadata":{"name":%q,"labels":{"app":%q}},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":%q}},
  "template":{"metadata":{"labels":{"app":%q}},
   "spec":{"containers":[{"name":"c","image":"registry.invalid/none:1"}]}}}}`,
		selftestName, selftestName, selftestName, selftestName)
	code, body, err = httpDo(c, "POST", coll, "application/json", []byte(manifest))
	if err != nil || code != 201 {
		return fmt.Errorf("POST deployment: HTTP %d %v %s", code, err, body)
	}
	var created deployment
	_ = json.Unmarshal(body, &created)
	fmt.Printf("ok   POST deployment %s replicas=%d -> 201, resourceVersion %s\n", selftestName, created.Spec.Replicas, created.Metadata.ResourceVersion)

	code, body, err = httpDo(c, "PATCH", coll+"/"+selftestName, "application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))
	var scaled deployment
	_ = json.Unmarshal(body, &scaled)
	if err != nil || code != 200 || scaled.Spec.Replicas != 3 {
		return fmt.Errorf("PATCH spec.replicas=3: HTTP %d %v %s", code, err, body)
	}
	fmt.Printf("ok   PATCH spec.replicas=3 -> 200, replicas=%d, resourceVersion %s\n", scaled.Spec.Replicas, scaled.Metadata.ResourceVersion)

	oldRV := created.Metadata.ResourceVersion
	watchURL := fmt.Sprintf("%s?watch=true&resourceVersion=%s&fieldSelector=metadata.name%%3D%s", coll, oldRV, selftestName)
	code, ev, err := firstWatchEvent(wc, watchURL)
	if err != nil || code != 200 || ev.Type != "MODIFIED" {
		return fmt.Errorf("watch from %s before compaction: HTTP %d %v %+v", oldRV, code, err, ev)
	}
	fmt.Printf("ok   watch from resourceVersion %s before compaction -> HTTP 200, first event %s (rv %s)\n", oldRV, ev.Type, ev.Object.Metadata.ResourceVersion)

	rev, err := etcdCompact(st.EtcdURL, true)
	if err != nil {
		return err
	}
	fmt.Printf("ok   compacted etcd at revision %d\n", rev)

	// Both the creation RV and the newest RV this client saw must now be expired.
	for _, rv := range []string{oldRV, scaled.Metadata.ResourceVersion} {
		u := fmt.Sprintf("%s?watch=true&resourceVersion=%s&fieldSelector=metadata.name%%3D%s", coll, rv, selftestName)
		code, ev, err = firstWatchEvent(wc, u)
		if err != nil || code != 200 || ev.Type != "ERROR" || ev.Object.Code != 410 || ev.Object.Reason != "Expired" {
			return fmt.Errorf("watch from %s after compaction: want HTTP 200 + ERROR 410 Expired, got HTTP %d %v %+v", rv, code, err, ev)
		}
		fmt.Printf("ok   watch from resourceVersion %s after compaction -> HTTP 200, event ERROR %d %s: %s\n", rv, ev.Object.Code, ev.Object.Reason, ev.Object.Message)
	}

	code, body, err = httpDo(c, "GET", coll+"?resourceVersion="+oldRV+"&resourceVersionMatch=Exact", "", nil)
	if err != nil || code != 410 {
		return fmt.Errorf("list at resourceVersion %s (Exact) after compaction: want HTTP 410, got %d %v %s", oldRV, code, err, body)
	}
	var status struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &status)
	fmt.Printf("ok   list resourceVersion=%s&resourceVersionMatch=Exact after compaction -> HTTP 410 %s: %s\n", oldRV, status.Reason, status.Message)

	code, body, err = httpDo(c, "GET", coll, "", nil)
	var list deployment // metadata.resourceVersion of the list
	_ = json.Unmarshal(body, &list)
	if err != nil || code != 200 {
		return fmt.Errorf("fresh list: HTTP %d %v %s", code, err, body)
	}
	code, body, err = httpDo(c, "DELETE", coll+"/"+selftestName, "", nil)
	if err != nil || code != 200 {
		return fmt.Errorf("DELETE deployment: HTTP %d %v %s", code, err, body)
	}
	code, ev, err = firstWatchEvent(wc, fmt.Sprintf("%s?watch=true&resourceVersion=%s", coll, list.Metadata.ResourceVersion))
	if err != nil || code != 200 || ev.Type != "DELETED" {
		return fmt.Errorf("watch from fresh list rv %s: HTTP %d %v %+v", list.Metadata.ResourceVersion, code, err, ev)
	}
	fmt.Printf("ok   relist (rv %s) + watch after compaction -> %s %s\n", list.Metadata.ResourceVersion, ev.Type, ev.Object.Metadata.Name)
	fmt.Println("selftest passed")
	return nil
}
