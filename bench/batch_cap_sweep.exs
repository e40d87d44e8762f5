# Runs the MNIST step benchmark once per batch cap, each in its own OS process (the cap is read
# at application start), and prints ms/step per cap and the speedup over cap 0.
#
#   mix run bench/batch_cap_sweep.exs [caps...]        (default caps: 0 1 4 16 64 256)
#
# With NXV_SWEEP_CMD set (e.g. "elixir examples/mnist_mlp_step_bench.exs", for machines without
# Mix) that command is run instead of `mix run examples/mnist_mlp_step_bench.exs`.
caps =
  case System.argv() do
    [] -> [0, 1, 4, 16, 64, 256]
    args -> Enum.map(args, &String.to_integer/1)
  end

[cmd | cmd_args] =
  String.split(System.get_env("NXV_SWEEP_CMD") || "mix run examples/mnist_mlp_step_bench.exs")

results =
  for cap <- caps do
    {out, status} =
      System.cmd(cmd, cmd_args ++ ["--blocks", "5", "--steps", "20"],
        env: [{"NXV_BATCH_MAX", Integer.to_string(cap)}],
        stderr_to_stdout: true
      )

    line = out |> String.split("\n") |> Enum.find(&String.starts_with?(&1, "RESULT "))

    if status != 0 or line == nil do
      IO.puts(out)
      raise "the benchmark failed at cap #{cap}"
    end

    fields =
      for pair <- tl(String.split(line)), into: %{} do
        [k, v] = String.split(pair, "=")
        {k, v}
      end

    {cap, fields}
  end

{_, base} = hd(Enum.sort_by(results, &elem(&1, 0)))
num = fn m, k -> String.to_float(m[k]) end

IO.puts(
  "\n| NXV_BATCH_MAX | jit ms/step (best) | compiled ms/step (best) | submissions/step | speedup over cap #{hd(Enum.sort(caps))} (compiled) | loss |"
)

IO.puts("|---|---|---|---|---|---|")

for {cap, r} <- results do
  speedup = num.(base, "compiled_best") / num.(r, "compiled_best")

  IO.puts(
    "| #{cap} | #{r["jit_best"] |> String.slice(0, 7)} | #{r["compiled_best"] |> String.slice(0, 7)} | #{r["submissions"]} | #{Float.round(speedup, 2)}x | #{r["loss"]} |"
  )
end

losses = results |> Enum.map(fn {_, r} -> r["loss"] end) |> Enum.uniq()

IO.puts(
  if length(losses) == 1,
    do: "\nloss bit-identical across caps",
    else: "\nLOSS DIFFERS ACROSS CAPS: #{inspect(losses)}"
)
