// Package idlist formats job ids for the dispatchers' errors.
package idlist

import "fmt"

// Format names up to ten ids, and how many more.
func Format(ids []int64) string {
	const most = 10
	s := fmt.Sprint(ids[:min(len(ids), most)])
	if len(ids) > most {
		s += fmt.Sprintf(" and %d more", len(ids)-most)
	}
	return s
}
