"""The ``modal_analysis`` node's services, one class per capability: each answers its requests
through :mod:`flexmodal_ros.nodes.conversions` and the ROS-free core, knowing nothing of the node
(:mod:`flexmodal_ros.nodes.modal_analysis_server` registers them and holds the lock).

- :mod:`.flexible_joint_service` — ``~/compute_modal_parameters`` (continuous or sampled-data AMA),
  ``~/compute_modal_map`` and the live ``~/modal_parameters`` (exact or polynomial fast path);
- :mod:`.closed_chain_service` — the same three for closed-chain robots (flexmodal_ros.constrained);
- :mod:`.expansion_service` — ``~/expand_modal_parameters`` (polynomial eigenpairs);
- :mod:`.link_service` — ``~/compute_link_modes`` (beam links).
"""
