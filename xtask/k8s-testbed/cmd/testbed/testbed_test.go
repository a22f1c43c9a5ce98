package main

import "testing"

func TestRouteTableHasDefault(t *testing.T) {
	const head = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	cases := []struct {
		name, table string
		want        bool
	}{
		{"default up", head + "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
			"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", true},
		{"only link route", head + "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n", false},
		{"default down", head + "eth0\t00000000\t010200C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n", false},
		{"empty", head, false},
	}
	for _, c := range cases {
		if got := routeTableHasDefault(c.table); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHasFlag(t *testing.T) {
	args := []string{"--v=2", "--advertise-address=10.1.2.3"}
	if !hasFlag(args, "--advertise-address") || hasFlag(args, "--advertise") || hasFlag(nil, "--v") {
		t.Fatal("hasFlag")
	}
}

func TestArgsRoundTrip(t *testing.T) {
	p := t.TempDir() + "/args"
	in := []string{"/bin/kube-apiserver", "--a=1", "--b=x y"}
	if err := writeArgs(p, in); err != nil {
		t.Fatal(err)
	}
	out, err := readArgs(p)
	if err != nil || len(out) != len(in) || out[2] != "--b=x y" {
		t.Fatalf("got %q, %v", out, err)
	}
	if writeArgs(p, []string{"a\nb"}) == nil {
		t.Fatal("newline accepted")
	}
}
