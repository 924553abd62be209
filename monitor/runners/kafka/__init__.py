"""The distributed runners on Kafka: the kafka-python engine (worker, core) and the Faust engine
(faust_app), with topic administration."""
