UPDATE refund_jobs SET state = 'ready' WHERE id = ?
