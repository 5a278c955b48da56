// The double-buffered loop of kernels that stream jobs through two VMEM buffer sets: job j+1's
// inputs are issued into the other set before job j's body runs, so its DMA overlaps the body.
// The body is emitted once per set because semaphores are immediates.
#pragma once

#include <functional>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

// Whether the jobs are divided among the launch's TensorCores (core_share.h), and in groups of
// how many (a register; -1: single jobs). The caller also marks the program split_across_cores.
struct JobSplit {
  bool across_cores = false;
  int unit = -1;
};

// Runs jobs 0 .. s`jobs` - 1 (this core's share of them with `split`) with s`job` holding the
// current one (s`next` is scratch for the next). `issue(job_reg, set)` emits the DMAs of a job's
// inputs into a set, which signal semaphore `input_sem` + set `input_signals` times in all (0:
// the job has no inputs to wait for); `body(set)` emits a job's work once they have landed.
// With `split`, s`jobs` ends as one past this core's last job.
void emit_job_loop(AsmWriter& w, int job, int next, int jobs, int input_sem, int input_signals,
                   const std::function<void(int, int)>& issue, const std::function<void(int)>& body,
                   const JobSplit& split = {});

}  // namespace vtpu::kernels
