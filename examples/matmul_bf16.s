; C (M x N, f32) = A (M x K, bf16) @ B (K x N, bf16) on a core with 4 MXUs of 128x128 (v4, v5e, v5p).
; bf16 products are exact; accumulation is f32 inside the MXU accumulator slots.
;
; Schedule (shapes: M % 256 == 0, N % 512 == 0, K % 128 == 0; A, B and CBUFS C tiles must fit VMEM):
;  - Output blocks of 256 x 512 in nb-major order: MXU j owns columns j*128..j*128+127,
;    accumulator slot r holds rows r*8..r*8+7. Each 128-deep K slice loads the four MXUs' weights
;    (double-buffered in the MXU: the load overlaps the previous slice's matmuls, provided the
;    front end reaches it in time) and streams 32 LHS tiles through them.
;  - Streaming: block b+1's input DMAs (A in 256x128 pieces, B in 128x512 pieces, each only the
;    first time a block needs it) are issued during block b's first slice, right after its weight
;    load: issued earlier, their scalar work would delay that load; one block ahead rather than
;    all up front, each block's C write-back takes its turn on the FIFO HBM timeline. All inputs
;    signal sem0 in the order the compute consumes them; the compute waits one piece at a time.
;  - Block b-1 is drained during block b's first slice: slot r is popped (two per LHS tile, in
;    the slice's first half) before block b's first matmul into it. The MXU runs its queue in
;    order, so the pop reads the finished sum and the matmul starts from zero; the MXUs never
;    wait for a drain. Block 0 drains the (zero) initial accumulators into a buffer that is never
;    written back; the last block is drained after the loop.
;  - C is multi-buffered in VMEM (CBUFS tiles, 2 by default): block d is drained into buffer
;    d % CBUFS and DMAd out on sem1 (dq2, so write-backs land in issue order) while the next
;    blocks compute; before reusing a buffer, the drain waits for its previous write-back.
.name matmul_bf16
.default M, 1024
.default N, 1024
.default K, 1024
.default CBUFS, 2                  ; C tiles in flight (2 = double-buffered)
.arg a buffer
.arg b buffer
.arg c buffer
.set CTILE, 256 * 512 * 4          ; bytes of one C block in VMEM (row stride 2048)

  sarg s1, a
  sarg s2, b
  sarg s3, c
  sli s7, 0                        ; VMEM: A at 0 (row-major, like HBM)
  sli s8, M * K * 2                ; VMEM: B after A
  sli s9, M * K * 2 + K * N * 2    ; VMEM: CBUFS C buffers after B
  sli s11, K * 2                   ; A row stride
  sli s12, N * 2                   ; B row stride
  sli s17, N / 512
  sli s18, M / 256
  sli s19, K / 128
  sli s28, 256                     ; A piece: 256 rows of 256 bytes
  sli s29, 128                     ; B piece: 128 rows ...
  sli s30, 1024                    ; ... of 1024 bytes
  sli s10, M / 256                 ; blocks per nb column
  smul s31, s17, s18               ; blocks in all
  sli s13, 0                       ; next block whose inputs are to be issued
  sli s24, -1                      ; block being computed (-1: block 0's inputs first)
  sli s20, 1
  jmp issue_block

; ---- block s24: slice 0 (weights, block s24+1's inputs, block s24-1's drain), then the rest ----
block:
  sdiv s14, s24, s10               ; nb of this block
  srem s15, s24, s10               ; mb of this block
  bne s14, s0, have_a0
  sem.wait sem0, 1                 ; A[mb, 0] landed
have_a0:
  bne s15, s0, have_b0
  sem.wait sem0, 1                 ; B[0, nb] landed
have_b0:
  smuli s20, s14, 1024
  sadd s20, s20, s8                ; weights of MXU 0: B[0, nb*512]
.rept 4, J
  saddi s21, s20, J * 256
  mxu.lw mxu[J], s21, N * 2
.endr
  saddi s20, s24, 2
  smin s20, s20, s31               ; issue up to block s24 + 1
issue_block:
  bge s13, s20, issued
  sdiv s4, s13, s10                ; its nb
  srem s5, s13, s10                ; its mb
  sli s6, 0                        ; kt
issue_kt:
  bne s4, s0, issue_skip_a         ; A pieces are first needed when nb == 0
  smuli s21, s5, 256
  smul s21, s21, s11
  smuli s22, s6, 256
  sadd s21, s21, s22               ; offset of A[mb*256, kt*128]
  sadd s22, s7, s21
  sadd s23, s1, s21
  dma.h2v dq0, sem0, s22, s23, s28, s28, s11, s11
issue_skip_a:
  bne s5, s0, issue_skip_b         ; B pieces are first needed when mb == 0
  smuli s21, s6, 128
  smul s21, s21, s12
  smuli s22, s4, 1024
  sadd s21, s21, s22               ; offset of B[kt*128, nb*512]
  sadd s22, s8, s21
  sadd s23, s2, s21
  dma.h2v dq1, sem0, s22, s23, s29, s30, s12, s12
issue_skip_b:
  saddi s6, s6, 1
  blt s6, s19, issue_kt
  saddi s13, s13, 1
  jmp issue_block
issued:
  bge s24, s0, drain_target
  sli s24, 0                       ; block 0's inputs are on their way: start it
  jmp block
drain_target:
  saddi s25, s24, CBUFS - 1
  sli s26, CBUFS
  srem s25, s25, s26               ; buffer of block s24 - 1
  sli s26, CBUFS + 1
  blt s24, s26, buffer_free        ; block s24 - 1 is among the first CBUFS: the buffer is fresh
  sem.wait sem1, 1                 ; its previous write-back (the k-th wait takes the k-th signal)
buffer_free:
  smuli s26, s25, CTILE
  sadd s26, s26, s9
  smov s27, s26                    ; C tile of block s24 - 1 in VMEM
  smuli s22, s15, 256 * K * 2
  sadd s22, s22, s7                ; LHS tile 0: A[mb*256, 0]
.rept 16, R
  vld.bf16 v[R % 8], m0, s22, 0, K * 2
.rept 2, H
.rept 4, J
  mxu.pop v[8 + ((2 * R + H) * 4 + J) % 16], mxu[J], 2 * R + H
  vst v[8 + ((2 * R + H) * 4 + J) % 16], m0, s26, J * 512, 2048
.endr
  saddi s26, s26, 8 * 2048
.endr
  mxu.mm mxu0, v[R % 8], R
  mxu.mm mxu1, v[R % 8], R
  mxu.mm mxu2, v[R % 8], R
  mxu.mm mxu3, v[R % 8], R
  saddi s22, s22, 8 * K * 2
.endr
.rept 16, R
  vld.bf16 v[R % 8], m0, s22, 0, K * 2
  mxu.mm mxu0, v[R % 8], R + 16
  mxu.mm mxu1, v[R % 8], R + 16
  mxu.mm mxu2, v[R % 8], R + 16
  mxu.mm mxu3, v[R % 8], R + 16
  saddi s22, s22, 8 * K * 2
.endr
  beq s24, s0, written             ; block 0 drained nothing
  saddi s21, s24, -1
  sdiv s20, s21, s10               ; nb of block s24 - 1
  srem s21, s21, s10               ; mb of block s24 - 1
  smuli s21, s21, 256 * N * 4
  smuli s20, s20, 2048
  sadd s20, s20, s21
  sadd s20, s20, s3                ; C[mb*256, nb*512] in HBM
  sli s21, 256
  sli s22, 2048
  sli s23, N * 4
  dma.v2h dq2, sem1, s27, s20, s21, s22, s22, s23
written:
  sli s16, 1                       ; kt
  bge s16, s19, block_done
slice_kt:
  bne s14, s0, have_a
  sem.wait sem0, 1                 ; A[mb, kt] landed
have_a:
  bne s15, s0, have_b
  sem.wait sem0, 1                 ; B[kt, nb] landed
have_b:
  smuli s20, s16, 128
  smul s20, s20, s12
  smuli s21, s14, 1024
  sadd s20, s20, s21
  sadd s20, s20, s8                ; weights of MXU 0: B[kt*128, nb*512]
.rept 4, J
  saddi s21, s20, J * 256
  mxu.lw mxu[J], s21, N * 2
.endr
  smuli s22, s15, 256 * K * 2
  smuli s21, s16, 256
  sadd s22, s22, s21
  sadd s22, s22, s7                ; LHS tile 0: A[mb*256, kt*128]
.rept 32, R
  vld.bf16 v[R % 8], m0, s22, 0, K * 2
  mxu.mm mxu0, v[R % 8], R
  mxu.mm mxu1, v[R % 8], R
  mxu.mm mxu2, v[R % 8], R
  mxu.mm mxu3, v[R % 8], R
  saddi s22, s22, 8 * K * 2
.endr
  saddi s16, s16, 1
  blt s16, s19, slice_kt
block_done:
  saddi s24, s24, 1
  blt s24, s31, block

  ; ---- the last block's drain: each 8-row tile goes out as soon as it is stored ----
  saddi s21, s31, -1               ; the last block
  sli s26, CBUFS
  srem s25, s21, s26               ; its buffer
  blt s21, s26, last_buffer_free   ; the last block is among the first CBUFS: the buffer is fresh
  sem.wait sem1, 1
last_buffer_free:
  smuli s26, s25, CTILE
  sadd s26, s26, s9                ; C tile in VMEM
  sdiv s20, s21, s10               ; nb of the last block
  srem s21, s21, s10               ; mb of the last block
  smuli s21, s21, 256 * N * 4
  smuli s20, s20, 2048
  sadd s20, s20, s21
  sadd s20, s20, s3                ; C[mb*256, nb*512] in HBM
  sli s21, 8
  sli s22, 2048
  sli s23, N * 4
.rept 32, R
.rept 4, J
  mxu.pop v[8 + (R * 4 + J) % 16], mxu[J], R
  vst v[8 + (R * 4 + J) % 16], m0, s26, J * 512, 2048
.endr
  dma.v2h dq2, sem1, s26, s20, s21, s22, s22, s23
  saddi s26, s26, 8 * 2048
  saddi s20, s20, 8 * N * 4
.endr
  halt
