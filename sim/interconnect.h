// A slice: chips joined by ICI links in a torus of one to three axes, and the time each
// collective takes on it in closed form (the textbook ring costs of ../shared/REFERENCES.md, "The
// interconnect"). The links themselves, with timelines that transfers share, are
// sim/ici_links.h; collective kernels run over them (sim/slice_launch.h) are checked against
// these forms.
//
// An axis with wraparound is a bidirectional ring, each direction one link of the preset's
// bandwidth; without wraparound it is a line, which moves data as fast as a one-way ring. Every
// hop costs the preset's hop latency. Collectives over several axes go axis by axis: a
// reduce-scatter shrinks the data by each axis' size in turn, an all-gather grows it back in
// reverse (the JAX scaling book's torus algorithms).
#pragma once

#include <string>
#include <vector>

#include "sim/chip_config.h"

namespace vtpu::sim {

class Slice {
 public:
  // `axes` chips along each axis (ranks row-major). Which axes wrap around follows the chip's
  // generation: 2-D tori (4 links per chip: v5e, v6e) only on an axis of 16, a full pod side;
  // 3-D tori (6 links: v4, v5p, v7) only when the slice is whole 4x4x4 cubes.
  Slice(const ChipConfig& chip, std::vector<int> axes);

  int size() const;
  const std::vector<int>& axes() const { return axes_; }
  const std::vector<bool>& wraps() const { return wraps_; }
  std::vector<int> coordinates(int rank) const;

  // Seconds; bytes as each names them.
  double all_gather(double output_bytes) const;    // each rank ends with the whole array
  double reduce_scatter(double input_bytes) const;  // each rank gives the whole array
  double all_reduce(double bytes) const;            // a reduce-scatter, then an all-gather
  double broadcast(double bytes) const;             // pipelined along each axis in turn
  double all_to_all(double input_bytes) const;      // a quarter of an all-gather's traffic per ring
  double point_to_point(int src, int dst, double bytes) const;  // torus distance in hops, then the data

 private:
  double axis_gather(int n, bool wraps, double bytes) const;
  int hops(int n, bool wraps) const;

  std::vector<int> axes_;
  std::vector<bool> wraps_;
  double link_bandwidth_ = 0, hop_latency_ = 0;
};

// "4", "2x4", "2x2x2": one to three axes of at least one chip. Throws std::invalid_argument.
std::vector<int> parse_topology(const std::string& text);

}  // namespace vtpu::sim
