// Package demo is refundd demo: the article's zombie story told step by
// step against a real database and the fake provider (Zombie), and the same
// failure at scale, with several real workers, random provider faults and
// one worker frozen past its lease (Scale). Both run in a throw-away
// database whose name ends in _demo, and fail if any refund was paid twice.
package demo
