// Package rabbitmq dispatches due refund jobs to workers through RabbitMQ,
// beside the workers' own scan of the table.
//
// The operation key stays outside and the attempt inside: a message carries
// a job id and nothing else, never an attempt, a lease or a right. A
// Dispatcher publishes the ids of jobs that are due (after their enqueue
// committed) to a durable quorum queue, with publisher confirms, and resends
// an id the broker did not confirm. A Consumer hands each delivered id to a
// worker as a hint (worker.Client.Hint), with manual acknowledgements and a
// prefetch sized on the worker's slots and budget; the worker claims the job
// by id through the same fenced claim as its scan, and the Consumer
// acknowledges the message once that claim was tried, whether it claimed the
// job or found nothing to do.
//
// So a message is a hint, never a right: a duplicated, redelivered,
// reordered or stale message can at worst make a claim find nothing to do.
// A consumer that dies after its worker claimed a job leaves the message
// unacknowledged: the broker delivers it again, and that claim finds the job
// running; the job itself is its holder's, or the lease and takeover path's
// when the holder died too. The workers' table scan stays the safety net: a
// message lost in the broker, purged by an operator or never published (a
// broker that is down) delays its job by at most one scan interval
// (worker.Config.ScanInterval) and loses nothing. Hints spend only the
// tokens a pass may spend on sends: takeovers and due reconciles keep their
// priority.
package rabbitmq
