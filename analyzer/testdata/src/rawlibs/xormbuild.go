package rawlibs

import (
	"xorm.io/xorm"
)

// XJob is an xorm bean of the fenced table.
type XJob struct {
	ID      int64 `xorm:"pk autoincr 'id'"`
	State   string
	Attempt int64
}

func (XJob) TableName() string { return "refund_jobs" } // want TableName:`returns\("refund_jobs"\)`

// RefundJob2 has no TableName: xorm's default mapper names it refund_job2.
type RefundJob2 struct{ ID int64 }

func (s *xormStore) Finish(j *XJob) error {
	_, err := s.engine.Table("refund_jobs").
		Where("id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt).
		Update(map[string]any{"state": "done"})
	return err
}

func (s *xormStore) FinishBean(j *XJob) error {
	_, err := s.engine.ID(j.ID).Where("state = ?", j.State).And("attempt = ?", j.Attempt).Cols("state").Update(j)
	return err
}

func (s *xormStore) FinishByID(j *XJob) error {
	_, err := s.engine.ID(j.ID).Cols("state").Update(j) // want `xorm Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

func xormChains(engine *xorm.Engine, db xorm.Interface, j *XJob, ids []int64) error {
	sess := engine.NewSession()
	defer sess.Close()
	q := sess.Table("refund_jobs").In("id", ids)
	if _, err := q.Update(map[string]any{"state": "ready"}); err != nil { // want `xorm Update: unfenced UPDATE of refund_jobs`
		return err
	}
	if _, err := sess.Table(new(XJob)).Where("id = ?", j.ID).Incr("attempt").Update(&XJob{State: "claimed"}); err != nil { // want `xorm Update: unfenced UPDATE of refund_jobs`
		return err
	}
	// An OR breaks the fence.
	if _, err := db.Where("state = ?", j.State).Or("attempt = ?", j.Attempt).Update(j); err != nil { // want `xorm Update: unfenced UPDATE of refund_jobs`
		return err
	}
	// Condition beans drop their zero fields: unprovable.
	if _, err := engine.Update(&XJob{State: "held"}, &XJob{ID: j.ID, State: j.State, Attempt: j.Attempt}); err != nil { // want `xorm Update: query built at run time writes refund_jobs`
		return err
	}
	// Another table, and a table named at run time: not judged.
	if _, err := engine.ID(1).Update(&RefundJob2{}); err != nil {
		return err
	}
	_, err := engine.Table(tableName()).ID(1).Update(map[string]any{"state": "x"})
	return err
}

func tableName() string { return "refund_jobs" }
