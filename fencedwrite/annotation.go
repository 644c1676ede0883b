package fencedwrite

// Annotation marks an Ent schema as a fenced job table and names the columns
// that play each role in the state machine. The fencedwrite/entext extension
// reads it and generates the lease type, claim, takeover, the fenced
// transitions, the transaction runner and the runtime backstop for the entity.
//
// Build it with Job, which fills in the conventional column names; set a field
// only when your column is named differently. The extension checks every name
// against the schema and fails code generation with an error that names the
// field when one is missing or has the wrong type.
type Annotation struct {
	// State is the enum column holding the job state. Its values must include
	// ready, running, succeeded, manual_review and failed.
	State string `json:"state"`
	// Token is the fencing token column: +1 on every claim, takeover and
	// operator resolution, never reset.
	Token string `json:"token"`
	// Writer is the nullable column every UPDATE sets to the token it holds;
	// the database trigger checks and clears it.
	Writer string `json:"writer"`
	// LeaseUntil is the nullable lease expiry (DATETIME(6), UTC).
	LeaseUntil string `json:"lease_until"`
	// NextRunAt is when a ready job becomes due.
	NextRunAt string `json:"next_run_at"`
	// NextAction is the enum column of what a claim does next: send the
	// request (the value Send names) or reconcile.
	NextAction string `json:"next_action"`
	// Send is NextAction's value that means "send the request to the
	// provider" ("" means refund, fencekit's own jobs). A transcoding job
	// names it transcode, say; the other value is always reconcile.
	Send string `json:"send,omitempty"`
	// KeyFirstUsedAt records when the idempotency key was first sent.
	KeyFirstUsedAt string `json:"key_first_used_at"`
	// LastSendAt records the latest claim that may have sent a request.
	LastSendAt string `json:"last_send_at"`
	// ProviderRef is the provider's id for the refund, saved as soon as known.
	ProviderRef string `json:"provider_ref"`
	// LastError is the last failure or rejection reason.
	LastError string `json:"last_error"`
	// ReviewReason and ReviewEvidence describe why a job sits in manual
	// review, and the evidence an operator resolved it with.
	ReviewReason   string `json:"review_reason"`
	ReviewEvidence string `json:"review_evidence"`
	// CreatedAt and UpdatedAt are DATETIME(6) columns set from the database
	// clock (UTC_TIMESTAMP(6)) by the fenced layer.
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	// Key is the business identity (the idempotency key sent to the provider).
	// It must be a unique string column.
	Key string `json:"key"`
	// Params are the immutable request parameters bound to Key. Enqueueing Key
	// again with the same Params is a no-op; with different Params, an error.
	Params []string `json:"params"`
	// Attempts, when set, names the append-only log of attempts: an Ent
	// entity's table with the columns job_id, attempt, op (claim, takeover,
	// resolution), holder, claimed_at and lease_until. Every claim and
	// takeover adds its rows in its own transaction, before COMMIT; an
	// operator's resolution adds its own.
	Attempts string `json:"attempts,omitempty"`
}

// SendAction is a's value of NextAction that sends the request: Send, or
// ActionRefund when it is empty.
func (a Annotation) SendAction() string {
	if a.Send == "" {
		return ActionRefund
	}
	return a.Send
}

// Name implements ent's schema.Annotation.
func (Annotation) Name() string { return "Fenced" }

// Job returns the annotation for a job table that uses the conventional
// column names of fencekit's refund_jobs, with the given request parameters.
func Job(key string, params ...string) Annotation {
	return Annotation{
		State:          "state",
		Token:          "attempt",
		Writer:         "writer_attempt",
		LeaseUntil:     "lease_until",
		NextRunAt:      "next_run_at",
		NextAction:     "next_action",
		KeyFirstUsedAt: "key_first_used_at",
		LastSendAt:     "last_send_at",
		ProviderRef:    "provider_refund_id",
		LastError:      "last_error",
		ReviewReason:   "review_reason",
		ReviewEvidence: "review_evidence",
		CreatedAt:      "created_at",
		UpdatedAt:      "updated_at",
		Key:            key,
		Params:         params,
	}
}
