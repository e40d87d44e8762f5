defmodule Nx.Vulkan.ResidencyRegister do
  @moduledoc false
  # Doctests whose work leaves the device, by function, with the reason (see
  # test/nx_vulkan/nx_doctest_test.exs). An entry is removed when its function becomes resident;
  # the doctest test fails for a new fallback and for a stale entry alike.
  @register %{
    Nx => %{
      {:acos, 1} => "acos: f64 acos on the device is not yet within libm's last digit",
      {:acosh, 1} => "acosh: f64 acosh on the device is not yet within libm's last digit",
      {:asin, 1} => "asin: f64 asin on the device is not yet within libm's last digit",
      {:asinh, 1} => "asinh: f64 asinh on the device is not yet within libm's last digit",
      {:atan, 1} => "atan: f64 atan on the device is not yet within libm's last digit",
      {:atanh, 1} => "atanh: f64 atanh on the device is not yet within libm's last digit",
      {:cbrt, 1} => "cbrt: f64 cbrt on the device is not yet within libm's last digit",
      {:conv, 3} => "conv: complex input",
      {:cosh, 1} => "cosh: f64 cosh on the device is not yet within libm's last digit",
      {:erf, 1} => "erf: f64 erf on the device is not yet within libm's last digit",
      {:erfc, 1} => "erfc: f64 erfc on the device is not yet within libm's last digit",
      {:fft, 2} => "fft: no device kernel yet",
      {:fft2, 2} => "fft: no device kernel yet",
      {:ifft, 2} => "ifft: no device kernel yet",
      {:ifft2, 2} => "ifft: no device kernel yet",
      {:irfft, 2} => "ifft: no device kernel yet",
      {:reduce, 4} => "reduce: no device kernel yet",
      {:rfft, 2} => "fft: no device kernel yet",
      {:sinh, 1} => "sinh: f64 sinh on the device is not yet within libm's last digit",
      {:tan, 1} => "tan: f64 tan on the device is not yet within libm's last digit",
      {:window_reduce, 5} => "window_reduce: no device kernel yet"
    },
    Nx.LinAlg => %{
      {:cholesky, 1} => "dot: dot on c64 has no device kernel yet",
      {:determinant, 1} => "abs: complex input; product: product on c64 has no device kernel yet",
      {:triangular_solve, 3} => "triangular_solve: complex input"
    }
  }

  def registered(module), do: Map.keys(Map.fetch!(@register, module))
  def doctest_exclusions(module), do: registered(module)
  def reason(module, fun), do: get_in(@register, [module, fun])

  @doc "The register entry a doctest test belongs to: {module, {fun, arity}} or {module, :moduledoc}."
  def entry_of(test_name) do
    case Regex.run(
           ~r/^doctest (?:module ([\w.]+)|([\w.]+)\.([^.\/\s]+)\/(\d+)) \(/,
           Atom.to_string(test_name)
         ) do
      [_, module] ->
        {Module.concat([module]), :moduledoc}

      [_, "", module, fun, arity] ->
        {Module.concat([module]), {String.to_atom(fun), String.to_integer(arity)}}
    end
  end

  @table __MODULE__

  def start, do: :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])

  def count(kind, test) do
    :ets.update_counter(@table, kind, 1, {kind, 0})
    if kind == :registered, do: :ets.insert(@table, {{:registered_test, test}, true})
  end

  # Resident: every doctest that ran without a host fallback, strict ones and registered ones.
  def report do
    counts = Map.new(:ets.tab2list(@table))
    strict = Map.get(counts, :resident, 0)
    registered = Map.get(counts, :registered, 0)
    total = strict + registered
    tags = Nx.Vulkan.Fallback.tag_counts()

    fell_back =
      for {{:registered_test, test}, true} <- counts,
          Enum.any?(tags, fn {tag, n} -> match?({_, ^test}, tag) and n > 0 end),
          do: test

    resident = total - length(fell_back)

    if total > 0 do
      IO.puts(
        "\nNx doctest residency: #{resident} of #{total} doctests stay on the device " <>
          "(#{Float.round(100 * resident / total, 1)}%); #{length(fell_back)} fall back, in " <>
          "#{length(registered(Nx)) + length(registered(Nx.LinAlg))} register entries"
      )
    end
  end
end
