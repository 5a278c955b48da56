; c[i] = a[i] + b[i] for i < n, f32. One vreg (1024 elements) per step: DMA both inputs into
; VMEM, add, store, DMA the result out. The last step masks the ragged tail, so n can be anything.
.name vector_add
.arg a buffer
.arg b buffer
.arg c buffer
.arg n scalar
.set TILE, 1024          ; elements in one vreg (8 sublanes x 128 lanes)
.set VA, 0               ; VMEM staging addresses
.set VB, 4096
.set VC, 8192

  sarg s1, a
  sarg s2, b
  sarg s3, c
  sarg s4, n
  sli s5, 0              ; i: first element of this step
  sli s7, TILE
  sli s10, VA
  sli s11, VB
  sli s12, VC
  sli s13, 1             ; DMA rows
  sli s14, 0             ; DMA strides (one row)
loop:
  bge s5, s4, done
  ssub s6, s4, s5
  smin s6, s6, s7        ; elements in this step
  smuli s8, s6, 4        ; their bytes
  smuli s9, s5, 4        ; byte offset of this step
  sadd s16, s1, s9
  sadd s17, s2, s9
  sadd s18, s3, s9
  dma.h2v dq0, sem0, s10, s16, s13, s8, s14, s14
  dma.h2v dq1, sem0, s11, s17, s13, s8, s14, s14
  sem.wait sem0, 2
  vmaskn m1, s6          ; lanes past the end are neither read nor written
  vld v1, m1, s10, 0, 512
  vld v2, m1, s11, 0, 512
  vadd v3, v1, v2
  vst v3, m1, s12, 0, 512
  dma.v2h dq2, sem1, s12, s18, s13, s8, s14, s14
  sem.wait sem1, 1       ; VC is reused by the next step
  sadd s5, s5, s7
  jmp loop
done:
  halt
