# The annotation records (assignments, votes, adjudication, pools, descriptions, queries,
# relations, snapshots, releases) are added stage by stage on top of the trajectories app.
