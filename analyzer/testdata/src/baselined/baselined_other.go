package baselined

// The entry for init in baselined.go does not accept this one.
func init() {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?") // want `^unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?; add AND state = \? AND attempt = \?$`
}
