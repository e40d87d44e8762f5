# The MNIST MLP (examples/mnist_mlp.exs) as a batched inference serving: Nx.Serving with
# `partitions: true` and `compiler: Nx.Vulkan`, one partition per device, driven by concurrent
# clients on this node and, with --remote, as many more on a second BEAM node (loopback) that
# reach the serving through Erlang distribution. Prints requests/s and p50/p99 latency per device
# count, after checking every answer of a sample against the BinaryBackend.
#
#   mix run examples/mnist_serving.exs [--devices 1,2] [--clients 16] [--requests 50]
#                                      [--batch 32] [--hidden 128] [--remote]
#
# --devices lists the device counts to measure (each a serving over devices 0..n-1; default:
# 1 and every device). Without several GPUs, NXV_LOGICAL_DEVICES=n opens n logical devices on one
# (each its own queue and GPU thread: what one GPU gains from several queues, and a check of the
# multi-device paths). Also runs as a plain `elixir` script with the apps on ERL_LIBS.
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Code.require_file("mnist_mlp.exs", __DIR__)

{opts, _, _} =
  OptionParser.parse(System.argv(),
    strict: [
      devices: :string,
      clients: :integer,
      requests: :integer,
      batch: :integer,
      hidden: :integer,
      remote: :boolean
    ]
  )

all = length(Nx.Vulkan.devices())

counts =
  case opts[:devices] do
    nil -> Enum.uniq([1, all])
    list -> list |> String.split(",") |> Enum.map(&String.to_integer/1)
  end

for n <- counts, n > all do
  raise ArgumentError, "--devices #{n}: this VM has #{all} device(s) (NXV_LOGICAL_DEVICES=n)"
end

clients = opts[:clients] || 16
requests = opts[:requests] || 50
batch_size = opts[:batch] || 32
hidden = opts[:hidden] || 128

# What clients (here and on the second node) run: `requests` single-image requests each, timed.
{:module, _, client_binary, _} =
  defmodule MNISTServingClient do
    def run(name, requests, seed) do
      for i <- 1..requests do
        image =
          Nx.iota({1, 784}, type: :f32, backend: Nx.BinaryBackend)
          |> Nx.remainder(seed + i)
          |> Nx.divide(seed + i)

        started = System.monotonic_time()
        probs = Nx.Serving.batched_run(name, Nx.Batch.concatenate([image]))
        {System.monotonic_time() - started, seed + i, probs}
      end
    end
  end

# The serving: each partition gets its device in the defn options and keeps the parameters there.
serving = fn params, devices ->
  Nx.Serving.new(
    fn defn_opts ->
      on_device =
        Enum.map(
          Tuple.to_list(params),
          &Nx.backend_copy(&1, {Nx.Vulkan.Backend, device: defn_opts[:device]})
        )

      predict = Nx.Defn.jit(&MNISTMLP.predict/2, defn_opts)
      # The batch goes to the partition's device as it is, and is padded there to the serving's
      # batch size (one program per partition, whatever the batch holds; Nx.Serving hands each
      # client its own rows). Padding on the host (Nx.Batch.pad/2) measured ~10 ms a batch.
      fn batch ->
        {x, _} = Nx.LazyContainer.traverse(batch, nil, fn _template, fun, acc -> {fun.(), acc} end)

        x =
          x
          |> Nx.backend_transfer({Nx.Vulkan.Backend, device: defn_opts[:device]})
          |> Nx.pad(0.0, [{0, batch_size - batch.size, 0}, {0, 0, 0}])

        predict.(List.to_tuple(on_device), x)
      end
    end,
    compiler: Nx.Vulkan,
    devices: devices
  )
  |> Nx.Serving.batch_size(batch_size)
  |> Nx.Serving.distributed_postprocessing(&Nx.backend_transfer(&1, Nx.BinaryBackend))
end

{params, _x, _labels} = MNISTMLP.inputs({1, 784, hidden, 10}, Nx.Vulkan.Backend)

remote =
  if opts[:remote] do
    {_, 0} = System.cmd("epmd", ["-daemon"])

    {:ok, _} =
      Node.start(:"nxv_serving_#{System.unique_integer([:positive])}@127.0.0.1", :longnames)

    {:ok, _peer, node} =
      :peer.start(%{
        name: :"nxv_clients_#{System.unique_integer([:positive])}",
        host: ~c"127.0.0.1",
        longnames: true,
        args: [~c"-setcookie", Atom.to_charlist(Node.get_cookie())]
      })

    :ok = :erpc.call(node, :code, :add_paths, [:code.get_path()])

    {:module, _} =
      :erpc.call(node, :code, :load_binary, [MNISTServingClient, ~c"nofile", client_binary])

    {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:nx])
    node
  end

percentile = fn sorted, p -> Enum.at(sorted, min(length(sorted) - 1, trunc(p * length(sorted)))) end
ms = fn native -> System.convert_time_unit(native, :native, :microsecond) / 1000 end

rows =
  for n <- counts do
    name = :"mnist_serving_#{n}"

    {:ok, sup} =
      Nx.Serving.start_link(
        serving: serving.(params, Enum.to_list(0..(n - 1))),
        name: name,
        partitions: true,
        batch_timeout: 1
      )

    # Warm-up: every client at once, so that every partition compiles its program (a lone
    # client's requests would all go to the first partition); then the timed run.
    1..clients
    |> Enum.map(fn c -> Task.async(fn -> MNISTServingClient.run(name, 3, c) end) end)
    |> Task.await_many(:infinity)

    local = if remote, do: div(clients, 2), else: clients
    started = System.monotonic_time()

    tasks =
      for c <- 1..clients do
        Task.async(fn ->
          if remote && c > local,
            do: :erpc.call(remote, MNISTServingClient, :run, [name, requests, c * 1000], :infinity),
            else: MNISTServingClient.run(name, requests, c * 1000)
        end)
      end

    results = tasks |> Task.await_many(:infinity) |> Enum.concat()
    wall = System.monotonic_time() - started

    # Every answer of the first clients checked against the BinaryBackend.
    host =
      Enum.map(Tuple.to_list(params), &Nx.backend_copy(&1, Nx.BinaryBackend)) |> List.to_tuple()

    for {_, seed, probs} <- Enum.take(results, 20) do
      image =
        Nx.iota({1, 784}, type: :f32, backend: Nx.BinaryBackend)
        |> Nx.remainder(seed)
        |> Nx.divide(seed)

      want = Nx.with_default_backend(Nx.BinaryBackend, fn -> MNISTMLP.predict(host, image) end)

      unless Nx.all_close(probs, want, atol: 1.0e-5) |> Nx.to_number() == 1,
        do:
          raise(
            "request #{seed}: #{inspect(probs)} differs from the BinaryBackend's #{inspect(want)}"
          )
    end

    latencies = results |> Enum.map(fn {t, _, _} -> ms.(t) end) |> Enum.sort()
    Supervisor.stop(sup)

    {n, length(results) / (ms.(wall) / 1000), percentile.(latencies, 0.5),
     percentile.(latencies, 0.99)}
  end

info = Nx.Vulkan.Device.info()

commit =
  System.get_env("NXV_COMMIT") ||
    case System.cmd("git", ["rev-parse", "--short", "HEAD"], stderr_to_stdout: true) do
      {sha, 0} -> String.trim(sha)
      _ -> "unknown"
    end

IO.puts("""
MNIST MLP serving (784-#{hidden}-10, serving batch #{batch_size}), #{info.name}, #{all} device(s) in this VM#{if System.get_env("NXV_LOGICAL_DEVICES"), do: " (logical)", else: ""}, commit #{commit}
#{clients} clients (#{if remote, do: "half on a second node", else: "all on this node"}) x #{requests} single-image requests, every sampled answer equal to the BinaryBackend's
| devices | requests/s | p50 ms | p99 ms | vs 1 device |
|---|---|---|---|---|\
""")

{_, base, _, _} = hd(rows)

for {n, rate, p50, p99} <- rows do
  f = &:erlang.float_to_binary(&1 * 1.0, decimals: 2)
  IO.puts("| #{n} | #{f.(rate)} | #{f.(p50)} | #{f.(p99)} | #{f.(rate / base)}x |")
end
