// Package kafka dispatches due refund jobs to workers through Kafka, beside
// the workers' own scan of the table: the other half of dispatch/rabbitmq.
//
// The operation key stays outside and the attempt inside. A message's key
// is the job's operation key, so that every hint of one job goes to one
// partition and stays in order there (until the topic's partition count
// changes); its value is the job's id in decimal and nothing else, never an
// attempt, a lease or a right. A Dispatcher publishes the ids of jobs that
// are due (after their enqueue committed) with franz-go's idempotent
// producer (acks from every in-sync replica; a retried produce is written
// once). A Consumer, a member of the fleet's consumer group (cooperative
// rebalancing), hands each id to a worker as a hint (worker.Client.Hint),
// polling no more records than the worker can try at once; the worker claims
// the job by id through the same fenced claim as its scan.
//
// A record's offset is committed only once its hint was judged: the
// worker's claim committed, or the claim found nothing to do (the job is
// settled, held by another worker, not due, or unknown: a stale hint, which
// is dropped). A claim that failed (rolled back, or its COMMIT's reply lost)
// is handed to the worker again, later; its offset waits. Offsets advance
// over a partition's judged prefix only, so a consumer that dies, or loses
// a partition in a rebalance, leaves every record it had not judged to the
// partition's next owner, which claims the job or finds nothing to do. A
// consumer never commits for a partition it no longer owns: a verdict that
// comes after the partition was revoked is dropped.
//
// So a message is a hint, never a right: a duplicated (a producer's retry,
// a publish sent again), redelivered, reordered or stale message can at
// worst make a claim find nothing to do. The workers' table scan stays the
// source of truth: a message lost, never published (a broker that is
// down), or gone with a deleted topic delays its job by at most one scan
// interval (worker.Config.ScanInterval) and loses nothing.
package kafka
