SELECT state, attempt FROM refund_jobs WHERE id = ?
