// The MXU's functional products. An mxu.mm pushes 8 rows (bf16 values widened to f32) against the
// D x D weights and adds the product to an 8 x D accumulator slot. The simulator queues the pushes
// made against one set of weights and multiplies them together when something needs the results
// (a pop, new weights, an int8 push, a full queue): one product of many rows, split across the
// host's cores. Each output is still the sum over k in increasing order, started from zero, then
// added to its slot, push by push in program order: the results are bit-identical to one product
// per push (and to Eigen's GEMM, used before; tests/python/test_host_speed_fingerprint.py). Where
// every product of the queued rows and the weights is exact in f32 (bf16 values well inside f32's
// range: nearly always), each step is one fused multiply-add on hosts that have it, which then
// gives the same bits as a multiply and an add in half the instructions.
#pragma once

#include "sim/core_state.h"

namespace vtpu::sim {

// Queues one push into `slot`; returns where its 8 x mxu.dim rows (rounded to bf16) go.
float* queue_mxu_push(MxuState& mxu, int slot);

// Multiplies every queued push and adds each product to its slot, in the order pushed.
void run_pending_mxu_pushes(MxuState& mxu);

// Makes the back weight buffer the current one (mxu.lw, mxu.swap), running first the pushes
// queued against the weights it replaces.
void switch_mxu_weights(MxuState& mxu);

}  // namespace vtpu::sim
