"""Real InfiniBand fabrics: ibnetdiscover/ibroute readers, routes and delay matrices (:mod:`.ibfabric`) and the
``query hosta:hostb`` route service of paper 002 (:mod:`.ibserve`)."""
