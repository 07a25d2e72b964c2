"""Fair sharing across tenants and classes, one mechanism for every runtime.

- ``spec.FairShareSpec``: weights, bands (classes) and the starvation bound, as configured;
- ``share.FairShare``: which waiting call an engine slot goes to (priority bands, weighted fair queuing between
  tenants within a band, aging past ``max_wait_s``); ``PolicyQueue`` runs it in the simulator, the gateway and
  the vLLM plugin alike;
- ``places.FairPlaces``: who holds the places of a bounded queue, and whom a full queue displaces.
"""
