INSERT INTO refund_jobs (operation_key, state) VALUES (?, 'ready') AS new
ON DUPLICATE KEY UPDATE state = new.state;
