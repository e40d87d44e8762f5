# Every f32 input of the f32 ops that take a short f64 evaluation (exp and sigmoid: math64.glsl's
# *_narrow functions), checked bit for bit against the same op computed in f64 by the full
# routine (exp64, sigmoid64) and rounded to f32, both on this device. The short path must agree
# everywhere: it gives way to the full routine wherever its own rounding could differ.
#
#   mix run bench/f32_exhaustive.exs               all 2^32 bit patterns (seconds on a GPU)
#   mix run bench/f32_exhaustive.exs 24            2^24 patterns spread over the whole range
#
# Prints, per op, the patterns checked, the mismatches and the first few of them.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)

log2_count =
  case System.argv() do
    [bits | _] -> String.to_integer(bits)
    [] -> 32
  end

chunk_bits = min(log2_count, 24)
chunks = Bitwise.bsl(1, log2_count - chunk_bits)
# Patterns checked: chunk c holds i * stride + c for i < 2^chunk_bits (every pattern once when
# log2_count is 32).
stride = Bitwise.bsl(1, 32 - chunk_bits)

base =
  Nx.iota({Bitwise.bsl(1, chunk_bits)}, type: :u32, backend: Nx.Vulkan.Backend)
  |> Nx.multiply(stride)

ops = [exp: &Nx.exp/1, sigmoid: &Nx.sigmoid/1]
IO.puts("device: #{Nx.Vulkan.Device.info().name}, #{chunks} chunks of 2^#{chunk_bits} patterns")

for {name, fun} <- ops do
  {micros, {bad, firsts}} =
    :timer.tc(fn ->
      Enum.reduce(0..(chunks - 1), {0, []}, fn c, {bad, firsts} ->
        x = base |> Nx.add(c * div(stride, chunks)) |> Nx.bitcast(:f32)
        short = fun.(x)
        full = x |> Nx.as_type(:f64) |> fun.() |> Nx.as_type(:f32)
        # Bits, so that NaN = NaN and -0.0 != 0.0.
        differ = Nx.not_equal(Nx.bitcast(short, :u32), Nx.bitcast(full, :u32))
        count = differ |> Nx.sum() |> Nx.to_number()

        firsts =
          if count > 0 and length(firsts) < 5 do
            at = differ |> Nx.argmax() |> Nx.to_number()
            firsts ++ [{Nx.to_number(x[at]), Nx.to_number(short[at]), Nx.to_number(full[at])}]
          else
            firsts
          end

        {bad + count, firsts}
      end)
    end)

  IO.puts(
    "#{name}: #{chunks * Bitwise.bsl(1, chunk_bits)} patterns, #{bad} mismatches, " <>
      "#{Float.round(micros / 1.0e6, 1)} s; first (x, short, full): #{inspect(firsts)}"
  )
end
