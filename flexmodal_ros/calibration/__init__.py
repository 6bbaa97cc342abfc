"""Calibration of the joint stiffness k and dampings d_f, d_fm of a robot, end to end (issue 31):
experiment design (:mod:`.experiment_design`, on :mod:`.eigen_sensitivity`), motor-pulse
excitation through the controller (:mod:`flexmodal_ros.control.excitation`), records, OMA, weighted
identification (:mod:`.weighted_fit`), the loop (:mod:`.campaign`) on offline plants
(:mod:`.offline_plants`) or a ROS robot (flexmodal_ros/nodes/topic_plant.py), validation and
outputs (:mod:`.calibration_report`). ROS-free."""
