// Package schema is the transcoding example's Ent schema: one fenced entity,
// TranscodeJob, generated into ../ (examples/transcode/README.md).
package schema

import (
	"fmt"
	"strings"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/fencekit/fencekit/fencedwrite"
)

// TranscodeJob is a video transcoding job: the article's first example of a
// job whose zombie worker overwrites a newer decision (a transcode already
// delivered marked for another run, which bills the encoding farm twice and
// may publish an older rendition over a newer one). It is fenced by the same
// annotation as fencekit's RefundJob (ent/schema/refundjob.go), under its own names: the request is a source and
// a preset bound to a job key, the action that sends it is transcode, and
// the encoder's id for the job is kept as soon as it is revealed. Nothing in
// fencekit's worker runs it, and fencekit's migrations do not install it: it
// shows that the fence, the generated API and fencelint are not
// refund-specific (docs/data-layer.md, "A second kind of job").
type TranscodeJob struct {
	ent.Schema
}

// The transcode job's action that sends the request to the encoder.
const transcodeAction = "transcode"

// Fields of the TranscodeJob.
func (TranscodeJob) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.String("job_key").
			Unique().
			Immutable().
			SchemaType(keyType).
			Validate(identifier).
			Comment("Business identity of the transcode; sent to the encoder as the idempotency key."),
		field.String("source_uri").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: fmt.Sprintf("varchar(%d)", maxSourceLen)}).
			Validate(sourceURI).
			Comment("The video to transcode."),
		field.String("preset").
			Immutable().
			SchemaType(keyType).
			Validate(identifier).
			Comment("The encoder's preset, e.g. h264-720p."),
		field.Int64("duration_ms").
			Immutable().
			Validate(durationMS).
			Comment("The source's length, which the encoder bills by."),
		field.Enum("state").
			Values(fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateSucceeded,
				fencedwrite.StateManualReview, fencedwrite.StateFailed).
			Default(fencedwrite.StateReady),
		field.Int64("attempt").
			Default(0).
			NonNegative().
			Comment("Fencing token: +1 on every claim, takeover and operator resolution, under the row lock."),
		field.Int64("writer_attempt").
			Optional().
			Nillable().
			Comment("The attempt an UPDATE declares it holds; checked and cleared by the trigger."),
		field.Time("lease_until").
			Optional().
			Nillable().
			SchemaType(datetime6),
		field.Enum("next_action").
			Values(transcodeAction, fencedwrite.ActionReconcile).
			Default(transcodeAction),
		field.Time("next_run_at").
			SchemaType(datetime6),
		field.String("encoder_job_id").
			Optional().
			Nillable().
			MaxLen(255).
			Comment("The encoder's id for the job, saved as soon as it is revealed."),
		field.Time("key_first_used_at").
			Optional().
			Nillable().
			SchemaType(datetime6),
		field.Time("last_send_at").
			Optional().
			Nillable().
			SchemaType(datetime6),
		field.Text("last_error").
			Optional().
			Nillable(),
		field.Text("review_reason").
			Optional().
			Nillable(),
		field.Text("review_evidence").
			Optional().
			Nillable(),
		field.Time("created_at").
			Immutable().
			SchemaType(datetime6),
		field.Time("updated_at").
			SchemaType(datetime6),
	}
}

// Indexes of the TranscodeJob: one for each scan of the generated claims.
func (TranscodeJob) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("state", "next_run_at").StorageKey("transcode_jobs_pending"),
		index.Fields("state", "next_action", "next_run_at").StorageKey("transcode_jobs_reconcile_due"),
		index.Fields("state", "lease_until").StorageKey("transcode_jobs_lease"),
	}
}

// Annotations of the TranscodeJob: the conventional names but the key, the
// request, the send action and the encoder's id. No attempts log.
func (TranscodeJob) Annotations() []schema.Annotation {
	a := fencedwrite.Job("job_key", "source_uri", "preset", "duration_ms")
	a.Send = transcodeAction
	a.ProviderRef = "encoder_job_id"
	return []schema.Annotation{
		entsql.Annotation{Table: "transcode_jobs"},
		a,
	}
}

// maxSourceLen bounds a source URI.
const maxSourceLen = 512

// sourceURI checks the video's location: an absolute s3, gs or https URI of
// printable ASCII without spaces.
func sourceURI(v string) error {
	if err := printable(v, maxSourceLen); err != nil {
		return err
	}
	if !strings.HasPrefix(v, "s3://") && !strings.HasPrefix(v, "gs://") && !strings.HasPrefix(v, "https://") {
		return fmt.Errorf("must be an s3://, gs:// or https:// URI, got %q", v)
	}
	return nil
}

// maxDurationMS bounds a source's length: 24 hours.
const maxDurationMS = 24 * 60 * 60 * 1000

func durationMS(v int64) error {
	if v <= 0 || v > maxDurationMS {
		return fmt.Errorf("must be between 1 and %d milliseconds, got %d", maxDurationMS, v)
	}
	return nil
}
