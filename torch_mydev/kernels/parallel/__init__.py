"""Large loops on several threads: ``threads`` (ATen's ``at::parallel_for`` rules, the
thread count, the Python pool of the casts), ``parts`` (cutting a plan's range, pure), the
package's one ``parallel=True`` loop (``_calls``) and the C entries it calls (``_entries``)."""
