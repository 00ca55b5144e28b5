INSERT INTO jobs (payload) VALUES ('{"n": 1}');
