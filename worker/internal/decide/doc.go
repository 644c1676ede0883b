// Package decide turns what the provider said into the transition the worker
// applies to the job it holds. Decide is a pure function: no I/O, no clock
// (every window is measured from Input.Now, the database's time of the
// claim), no randomness. The same Input always gives the same Decision, and
// every Input gives exactly one Decision, with a Kind, a Rule and, for
// Complete, the provider refund id to save.
//
// The authority is DESIGN.md ("What the provider says, and what the worker
// does"). Decide never resends against evidence that the refund may exist,
// never completes a job without a verified succeeded or reversed answer for
// the job's own operation key, and never fails a job without a definitive
// rejection for that key.
//
// # Rules
//
// Each Decision names the rule that took it (Decision.Rule, the Rule*
// constants). They are checked in this order; the first that applies wins.
//
// Guards, whatever the action:
//
//	RuleUnknownAction          the action is neither refund nor reconcile      manual review
//	RuleNoOperationKey         the job's request has no operation key          manual review
//
// After a send (Action Refund). The client verified the answer already;
// Decide verifies it again (provider.Verify) and treats a mismatch as
// provider.ErrMismatch. When the same error matches several sentinels, the
// most careful reading wins, in this order:
//
//	RuleSendMismatch           answer about another reference/payment/amount/
//	                           currency, or ErrMismatch                        manual review, answer as evidence
//	RuleSendOtherRefund        a verified answer names another refund id than
//	                           the one known for this key                      manual review + alert
//	RuleSendKeyParamsMismatch  ErrKeyParamsMismatch                            manual review; never a new key
//	RuleSendOutcomeUnknown     ErrOutcomeUnknown (timeout, reset, 5xx, ...)    reconcile after Retry
//	RuleSendRefundedElsewhere  ErrAlreadyRefunded, with no verified answer for
//	                           this key, on the key's first send               manual review
//	RuleSendAlreadyRefunded    ErrAlreadyRefunded otherwise (after a send that
//	                           may have executed), or a reversed answer        reconcile now (evidence of success)
//	RuleSendKeyInUse           ErrKeyInUse                                     reconcile after Retry
//	RuleSendInvalidRequest     ErrInvalidRequest (not sent: a caller bug)      manual review
//	RuleSendRateLimited        ErrRateLimited alone (nothing processed)        refund after Retry, same key
//	RuleSendRejected           ErrRejected alone                               fail with code and reason
//	RuleSendUnknownError       any other error                                 reconcile after Retry
//	RuleSendSucceeded          succeeded, with a refund id (answer or known)   complete
//	RuleSendSucceededNoID      succeeded, but no refund id to save             reconcile after Retry
//	RuleSendPending            pending                                         reconcile after Pending, id saved
//	RuleSendUnexpectedAnswer   no error but a status the contract excludes     reconcile after Retry
//
// A reconcile (Action Reconcile). A failed lookup says nothing about the
// refund:
//
//	RuleLookupNoLookup         ErrNoLookup                                     manual review (cannot reconcile)
//	RuleLookupInvalidRequest   ErrInvalidRequest                               manual review
//	RuleLookupRateLimited      ErrRateLimited                                  reconcile after Retry
//	RuleLookupOutcomeUnknown   ErrOutcomeUnknown                               reconcile after Retry
//	RuleLookupUnknownError     any other error                                 reconcile after Retry
//
// Only results whose Reference is the job's operation key count; each must
// pass provider.Verify:
//
//	RuleReconcileMismatch       a result for the key fails Verify               manual review, answer as evidence
//	RuleReconcileSeveralRefunds more than one refund id for the key (counting
//	                            the one known before)                           manual review + alert
//	RuleReconcileUnknownStatus  a status the provider never reports             manual review
//	RuleReconcileContradiction  rejected and succeeded/reversed at once         manual review
//	RuleReconcileNoRefundID     succeeded or reversed, but no refund id known   manual review
//	RuleReconcileReversed       reversed (it executed, then came back)          complete + alert
//	RuleReconcileSucceeded      succeeded                                       complete
//	RuleReconcileRejectedVsLog  rejected, but the log says succeeded/reversed   manual review
//	RuleReconcileRejected       rejected (definitive, for the same key)         fail
//	RuleReconcilePending        pending                                         reconcile after Pending, id saved
//
// Not found is not proof:
//
//	RuleNotFoundLogOfUnsentKey  never sent, but a refund id is known or the log
//	                            holds provider evidence for the key             manual review
//	RuleNotFoundNeverSent       never sent: nothing can exist                   refund now
//	RuleNotFoundInLag           inside the lookup lag of the last send          reconcile after max(rest of lag, LagPoll)
//	RuleNotFoundLogOfRefund     the log says succeeded, pending or reversed     manual review; never resend
//	RuleNotFoundKnownRefund     the provider named a refund id for the key
//	                            before (Input.ProviderRefundID)                 manual review; never resend
//	RuleNotFoundOtherLog        the log holds other provider evidence
//	                            (rejected, conflict, ...)                       manual review
//	RuleNotFoundResend          SafeResend and the key inside its window        refund now, same key
//	RuleNotFoundResendUnsafe    otherwise                                       manual review
//
// # Where DESIGN.md is silent
//
// These choices are Decide's own; each errs towards manual review:
//
//   - An error that matches several sentinels breaks the client's contract
//     and is read the most careful way (the order above): manual review,
//     then reconcile. A resend or a failure needs an error that matches
//     ErrRateLimited or ErrRejected and no other sentinel; otherwise it is
//     an unknown error, reconciled.
//   - Two different refund ids for one operation key mean the provider holds
//     two refunds for one request, which fencekit exists to prevent: manual
//     review, and an alert.
//   - "Already refunded" or "exceeds refundable amount" is evidence of our
//     own success only after a send that may have executed. On the key's
//     first send (KeyFirstUsedAt and LastSendAt both set and equal) and with
//     no verified answer for the key, the payment was refunded by something
//     else: an operator decides, never a failure and never a reconcile loop.
//   - A verified rejection is not final when the log holds evidence that the
//     refund succeeded or was reversed: manual review, not fail.
//   - A key the caller says was never sent is refunded at once only if no
//     refund id is known for it and the log holds no provider evidence about
//     it either; otherwise the facts disagree.
//   - A refund id known for the key (the provider revealed it, on a pending
//     answer say) is evidence that the refund exists, like a log entry: not
//     found after the lag is then a case for an operator, never a resend.
//   - After the lag, any evidence for the key other than "not found" blocks
//     a resend (an "already refunded" answer recorded as a conflict, a
//     rejection, a status Decide cannot read): an operator decides.
//   - A Complete saves the refund id that the succeeded or reversed answer
//     itself names, or else the id known before this attempt; never an id
//     named only by another row (a pending one, say). With neither, a
//     reconcile goes to manual review, and a send is reconciled to learn
//     the id.
//
// The lookup-lag window starts at the later of LastSendAt and
// KeyFirstUsedAt. A resend needs KeyFirstUsedAt (the key's window is
// measured from it); the claim checks the window again before sending.
//
// Evidence is read only when reconciling. After a send, the fields for a
// reconcile (Found, LookupErr, Evidence) are ignored, and the other way
// round.
package decide
