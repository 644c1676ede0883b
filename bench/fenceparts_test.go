package main

import (
	"io"
	"strings"
	"testing"
)

// TestFencePartsVariantsApplyAndKeepThePath runs the -fence-parts
// diagnostic at a tiny size: every variant's cuts match the migrated
// triggers (fenceParts fails on a cut that matches nothing), the server
// holds each variant's bodies once installed, and under every variant the
// claim, the completion and the ledger's settlement change every row of
// their slice and leave every job succeeded and its ledger row refunded.
func TestFencePartsVariantsApplyAndKeepThePath(t *testing.T) {
	r, err := fenceParts(t.Context(), 4, 2, 1, "", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Variants) != len(fenceVariants()) {
		t.Fatalf("%d variants measured, want %d", len(r.Variants), len(fenceVariants()))
	}
	for _, v := range r.Variants {
		if v.Claim <= 0 && v.Complete <= 0 && v.Ledger <= 0 {
			t.Errorf("%s: measured nothing: %+v", v.Name, v)
		}
	}
}

// TestFencePartsCutsChangeTheBody checks that each cut of a part variant
// changes the migrated body it names, and that a cut matching nothing is
// refused with its trigger's name.
func TestFencePartsCutsChangeTheBody(t *testing.T) {
	ctx := t.Context()
	m, raw := scratchDB(t, "partscuts", nil)
	stock, err := readTriggers(ctx, raw, m.name)
	if err != nil {
		t.Fatal(err)
	}
	earlier, err := earlierTriggers(ctx, fenceVariants())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range fenceVariants() {
		for _, c := range v.cuts {
			base := stock
			if v.before != "" {
				base = earlier[v.before]
			}
			got, err := applyCuts(c.trigger, base[c.trigger].body, []cut{c})
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
			} else if got == base[c.trigger].body {
				t.Errorf("%s: cut %q left %s unchanged", v.Name, c.re, c.trigger)
			}
		}
	}
	_, err = applyCuts("refund_jobs_fence", stock["refund_jobs_fence"].body, []cut{{"refund_jobs_fence", "no such text", ""}})
	if err == nil || !strings.Contains(err.Error(), "refund_jobs_fence") {
		t.Errorf("a cut matching nothing: %v, want an error naming the trigger", err)
	}
}

// A part's share is over its own fence and no triggers, wherever the
// references stand in the list.
func TestFencePartsSharesAreOfTheirOwnFence(t *testing.T) {
	vs := []partsResult{
		{fenceVariant: fenceVariant{Name: "migrated"}, Job: 60, Single: 300},
		{fenceVariant: fenceVariant{Name: "previous fence", before: previousFenceBefore}, Job: 100, Single: 400},
		{fenceVariant: fenceVariant{Name: "fast paths as one expression", before: byMoveBefore}, Job: 80, Single: 350},
		{fenceVariant: fenceVariant{Name: "no triggers", drop: true}, Job: 20, Single: 200},
		{fenceVariant: fenceVariant{Name: "a part of the migrated fence", Part: "x"}, Job: 50, Single: 250},
		{fenceVariant: fenceVariant{Name: "a part of the previous fence", Part: "y", before: previousFenceBefore}, Job: 80, Single: 300},
	}
	setShares(vs)
	if got := vs[4]; got.Share != 0.25 || got.SingleShare != 0.5 {
		t.Errorf("a part of the migrated fence: share %v, single %v; want 0.25 and 0.5 ((60-50)/(60-20), (300-250)/(300-200))", got.Share, got.SingleShare)
	}
	if got := vs[5]; got.Share != 0.25 || got.SingleShare != 0.5 {
		t.Errorf("a part of the previous fence: share %v, single %v; want 0.25 and 0.5 ((100-80)/(100-20), (400-300)/(400-200))", got.Share, got.SingleShare)
	}
	if vs[0].Share != 0 || vs[2].Share != 0 {
		t.Errorf("references have no share: %v, %v", vs[0].Share, vs[2].Share)
	}
}
